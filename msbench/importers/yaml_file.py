"""Reading a YAML config the way its framework does: PyYAML's safe loader (MindFormers, mindcv and mindyolo
all read theirs with yaml.safe_load), plus MindFormers' `base_config` and mindyolo's `__BASE__` inheritance
(a file or list of files relative to it, merged first in order; the file's own keys override theirs, table
by table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from msbench.errors import UserError

BASE_KEYS = ("base_config", "__BASE__")     # MindFormers' tools/register/config.py BASE_CONFIG; mindyolo's
MAX_BASE_DEPTH = 8


def merged(over: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into `base`: tables recursively, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(value, out[key]) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def load_yaml(path: str | Path, depth: int = 0) -> dict[str, Any]:
    """The config's tables, its `base_config` files merged under it; a missing or malformed file is one line."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); a config is a YAML file") from None
    except yaml.YAMLError as err:
        raise UserError(f"{path}: malformed YAML: {' '.join(str(err).split())}") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read the config file ({err.strerror})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a config is a YAML mapping of sections (model, context, ...), not "
                        f"{type(data).__name__}")
    bases = [name for key in BASE_KEYS for name in _listed(data.pop(key, []))]
    if bases and depth >= MAX_BASE_DEPTH:
        raise UserError(f"{path}: {' / '.join(BASE_KEYS)} nests deeper than {MAX_BASE_DEPTH} files (a loop?)")
    base: dict[str, Any] = {}
    for name in bases:
        base = merged(load_yaml(path.parent / str(name), depth + 1), base)
    return merged(data, base)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
