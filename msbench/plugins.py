"""Plugins: the one place where a name may become an import.

Matrix files are data, so a name found in one is never imported or called on its own. A plugin
(a target today, a workload later) is code only when the user trusted it: an installed package
registered it under an entry-point group (`msbench.targets`: `name = "module:Class"`), or the
command line allowed it with `--allow-plugin module:Class`. Everything else is refused by name,
before any import. The isolated worker receives the allow-list in its request, never re-reading it.
"""

from __future__ import annotations

import functools
import importlib
import re
from importlib import metadata
from typing import Iterable, Mapping

from msbench.errors import UserError

TARGET_GROUP = "msbench.targets"
SPEC = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def check_spec(spec: str) -> str:
    """`--allow-plugin` values are `module.path:Class`, nothing else (no arguments, no expressions)."""
    if not isinstance(spec, str) or not SPEC.fullmatch(spec):
        raise UserError(f"--allow-plugin={spec!r} is not allowed; allowed: module.path:Class")
    return spec


@functools.cache
def installed(group: str) -> tuple[tuple[str, str], ...]:
    """(name, `module:Class`) of the group's installed entry points: read once (a scan of site-packages),
    importing nothing."""
    return tuple((ep.name, ep.value) for ep in metadata.entry_points(group=group))


def registered(group: str, allowed: Iterable[str] = ()) -> dict[str, str]:
    """Plugin name -> `module:Class`: the group's installed entry points plus the allowed specs (each named
    by itself)."""
    plugins = dict(installed(group))
    plugins.update({check_spec(spec): spec for spec in allowed})
    return plugins


def import_object(path: str) -> object:
    """`module:attr` -> the object. Only for fixed internal tables and for `registered` plugins."""
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise UserError(f"cannot import {path!r}: {err}") from None


def load_plugin(group: str, name: str, allowed: Iterable[str] = ()) -> object:
    """The class a registered plugin name stands for; an unregistered name is refused without import."""
    plugins: Mapping[str, str] = registered(group, allowed)
    if name not in plugins:
        raise UserError(f"plugin {name!r} is not registered in {group} nor allowed with --allow-plugin")
    return import_object(plugins[name])
