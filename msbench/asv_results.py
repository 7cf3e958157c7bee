"""asv's results directory (its documented format, version 2) as plain rows, without asv's internal API.

Layout: `<dir>/benchmarks.json` (the current suite: parameter names, versions, units) and
`<dir>/<machine>/<commit[:8]>-<env>.json`, one file per commit and environment.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from msbench.errors import UserError

RESULTS_VERSION = 2


@dataclass(frozen=True)
class AsvValue:
    """One parameter combination of one benchmark at one commit: ok, skipped (NaN) or failed (null)."""

    machine: str
    env: str
    commit: str
    benchmark: str                          # e.g. matrix_cells.Performance.track_throughput
    params: tuple[tuple[str, Any], ...]     # (name, value) in asv's order
    value: float | None
    status: str                             # ok | skipped | failed
    current: bool                           # its version is the current suite's (asv ignores others)

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)


def is_results_dir(path: Path) -> bool:
    return (path / "benchmarks.json").is_file()


def read_json(path: Path) -> dict[str, Any]:
    """asv writes literal NaN, which Python's json accepts; anything else unreadable is a corrupt file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: corrupt asv results file ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: corrupt asv results file (top level is {type(data).__name__}, not an object)")
    return data


def suite_metadata(results_dir: Path) -> dict[str, dict[str, Any]]:
    """benchmarks.json: name -> {param_names, version, unit, ...} of the suite asv last discovered."""
    data = read_json(results_dir / "benchmarks.json")
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def result_files(results_dir: Path, machine: str | None = None) -> Iterator[tuple[str, Path]]:
    for machine_dir in sorted(p for p in results_dir.iterdir() if p.is_dir() and machine in (None, p.name)):
        for path in sorted(machine_dir.glob("*.json")):
            if path.name != "machine.json":
                yield machine_dir.name, path


def load_results(results_dir: str | Path, commits: set[str] | None = None) -> list[AsvValue]:
    """Every stored value (optionally only of some full commit hashes), in file order."""
    results_dir = Path(results_dir)
    suite = suite_metadata(results_dir)
    out: list[AsvValue] = []
    for machine, path in result_files(results_dir):
        data = read_json(path)
        try:
            commit, env = data["commit_hash"], data["env_name"]
            if commits is not None and commit not in commits:
                continue
            if data.get("version") != RESULTS_VERSION:
                raise UserError(f"{path}: asv results version {data.get('version')!r} is not supported; "
                                f"allowed: {RESULTS_VERSION}")
            columns = data["result_columns"]
            for name, row in data["results"].items():
                out.extend(_values(machine, env, commit, name, dict(zip(columns, row)), suite.get(name, {})))
        except (KeyError, TypeError, ValueError, SyntaxError) as err:
            raise UserError(f"{path}: corrupt asv results file ({type(err).__name__}: {err})") from None
    return out


def result_commits(results_dir: str | Path, machine: str | None = None) -> set[str]:
    """Full hashes of the commits with a results file (of one machine, or any), read from the files."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return set()
    return {read_json(path).get("commit_hash", "") for _, path in result_files(results_dir, machine)} - {""}


def _values(machine: str, env: str, commit: str, name: str, rec: dict[str, Any],
            meta: dict[str, Any]) -> Iterator[AsvValue]:
    params = [[ast.literal_eval(v) for v in values] for values in rec.get("params") or []]
    names = list(meta.get("param_names") or [f"param{i + 1}" for i in range(len(params))])
    combos = list(itertools.product(*params)) if params else [()]
    values = rec.get("result")
    current = meta.get("version") is not None and meta.get("version") == rec.get("version")
    for i, combo in enumerate(combos):
        raw = values[i] if values is not None else None
        status = "failed" if raw is None else "skipped" if isinstance(raw, float) and math.isnan(raw) else "ok"
        yield AsvValue(machine, env, commit, name, tuple(zip(names, combo)),
                       float(raw) if status == "ok" else None, status, current)
