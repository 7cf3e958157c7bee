"""Read asv results files (format version 2) into a long pandas frame, without importing asv.

Layout (reference/asv.md §2.3): `<results>/benchmarks.json` holds parameter names, and
`<results>/<machine>/<commit[:8]>-<env>.json` one commit's values: `results[name]` is a row
aligned with `result_columns`, `result` a flat list in `itertools.product(*params)` order,
a number = ok, NaN = skipped, null = failed.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from msbench.errors import UserError

ASV_COLUMNS = ["machine", "commit", "date", "env", "benchmark", "params", "value", "status"]


def is_asv_results(path: Path) -> bool:
    """True for a per-commit asv results file (not benchmarks.json or machine.json)."""
    if path.suffix != ".json" or path.name in ("benchmarks.json", "machine.json"):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "result_columns" in data and "results" in data


def param_names(results_file: Path) -> dict[str, list[str]]:
    """Benchmark name -> parameter names, from the benchmarks.json one or two levels up."""
    for folder in (results_file.parent.parent, results_file.parent):
        meta = folder / "benchmarks.json"
        if meta.is_file():
            data = json.loads(meta.read_text())
            return {name: list(info.get("param_names") or []) for name, info in data.items()
                    if isinstance(info, dict)}
    return {}


def literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def read_asv_file(path: Path) -> pd.DataFrame:
    """One asv results file as rows of ASV_COLUMNS (one row per benchmark x parameter combination)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable asv results file ({err})") from None
    if data.get("version") != 2:
        raise UserError(f"{path}: asv results version={data.get('version')!r} is not supported; allowed: 2")
    names = param_names(path)
    columns = data["result_columns"]
    machine = (data.get("params") or {}).get("machine", path.parent.name)
    rows = []
    for bench, raw in data["results"].items():
        entry = dict(zip(columns, raw))
        params = entry.get("params") or []
        combos = list(itertools.product(*params)) if params else [()]
        values = entry.get("result")
        labels = names.get(bench) or [f"p{i}" for i in range(len(params))]
        for i, combo in enumerate(combos):
            value = values[i] if values is not None and i < len(values) else None
            status = "failed" if value is None else ("skipped" if isinstance(value, float) and math.isnan(value) else "ok")
            rows.append({
                "machine": machine, "commit": data.get("commit_hash"), "date": data.get("date"),
                "env": data.get("env_name"), "benchmark": bench,
                "params": ", ".join(f"{n}={literal(v)}" for n, v in zip(labels, combo)),
                "value": value if status == "ok" else None, "status": status,
            })
    return pd.DataFrame(rows, columns=ASV_COLUMNS)


def read_asv(paths: list[Path]) -> pd.DataFrame:
    frames = [read_asv_file(p) for p in paths]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ASV_COLUMNS)
