"""Commit diff: the same cells at two commits, direction-aware, regressions first, with the
environment difference from the records' provenance.

The comparison itself is `msbench.compare` (the metrics and directions of `msbench.tracked`), so
the report and `msbench compare` can never disagree; this module only picks the two sides (run
records split by the report, or two asv commits) and adds the environment difference.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from msbench.asv_results import read_json, result_files
from msbench.conditions import of_record
from msbench.compare import Observation, Row, asv_observations, compare
from msbench.records import Record
from msbench.report.load import RecordSet
from msbench.tracked import TRACKED, cell_key, tracked_values

DIFF_COLUMNS = ["flag", "source", "workload", "variant", "target", "metric", "before", "after", "change",
                "direction", "note", "cell_id"]
ENV_FIRST = ("mindspore", "numpy", "cpu.flags", "python", "cpu.model", "env.ONEDNN_MAX_CPU_ISA")
IGNORED_PROVENANCE = ("started", "commit", "dirty")
BEFORE, AFTER = "before", "after"


def common_cells(before: RecordSet, after: RecordSet) -> set[str]:
    return {r.cell_id for r in before.records} & {r.cell_id for r in after.records}


def run_rows(before: RecordSet, after: RecordSet, threshold: float, tolerance_pp: float) -> list[Row]:
    """Compare the cells both sides ran (same cell id: same workload, preset, settings and target),
    whatever their commits: the sides are named, not hashed. Labels alone would pair unlike cells
    of two different matrices."""
    both = common_cells(before, after)
    observations = [Observation("runs", side, cell_key(rec.cell), name, value if rec.status == "ok" else None,
                                rec.status, rec.cell_id, of_record(rec))
                    for side, runs in ((BEFORE, before), (AFTER, after)) for rec in runs.records
                    if rec.cell_id in both for name, value in tracked_values(rec.metrics).items()]
    return compare(observations, BEFORE, AFTER, threshold, tolerance_pp)


def asv_commit_order(dirs: Sequence[Path]) -> list[str]:
    """Commits with asv results, oldest first by the commit date asv stores."""
    dates: dict[str, float] = {}
    for folder in dirs:
        for _, path in result_files(folder):
            data = read_json(path)
            if "commit_hash" in data:
                dates[data["commit_hash"]] = float(data.get("date") or 0)
    return sorted(dates, key=lambda c: (dates[c], c))


def asv_sides(dirs: Sequence[Path], baseline: str | None) -> tuple[str, str] | None:
    """(before, after): the given baseline commit (prefix) or the one before the newest, and the newest."""
    order = asv_commit_order(dirs)
    if len(order) < 2:
        return None
    after = order[-1]
    before = next((c for c in order if baseline and c.startswith(baseline)), None) if baseline else order[-2]
    return None if before is None or before == after else (before, after)


def asv_rows(dirs: Sequence[Path], before: str, after: str, threshold: float, tolerance_pp: float) -> list[Row]:
    observations = [o for d in dirs for o in asv_observations(d)]
    return compare(observations, before, after, threshold, tolerance_pp)


def diff_frame(rows: Iterable[Row], ids: Mapping[tuple[str, str, str], str]) -> pd.DataFrame:
    """Rows as a frame: change in % (relative metrics) or pp, with the cell id where one is known."""
    out = []
    for row in rows:
        data = asdict(row)
        if row.change is not None and not TRACKED[row.metric].absolute:
            data["change"] = row.change * 100.0
        data["metric"] = f"{row.metric} ({'pp' if TRACKED[row.metric].absolute else '%'})"
        data["cell_id"] = row.cell_id or ids.get((row.workload, row.variant, row.target), "")
        out.append(data)
    return pd.DataFrame(out, columns=DIFF_COLUMNS)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple, set)):
            out[name] = " ".join(sorted(map(str, value)))
        else:
            out[name] = str(value)
    return out


def environment_values(records: Iterable[Record]) -> dict[str, set[str]]:
    values: dict[str, set[str]] = {}
    for rec in records:
        for key, value in flatten(rec.provenance).items():
            if key not in IGNORED_PROVENANCE:
                values.setdefault(key, set()).add(value)
    return values


def environment_diff(before: Iterable[Record], after: Iterable[Record]) -> pd.DataFrame:
    """Provenance keys whose values differ between the two sides (MindSpore, NumPy, CPU flags first)."""
    old, new = environment_values(before), environment_values(after)
    rows = []
    for key in sorted(set(old) | set(new), key=lambda k: (ENV_FIRST.index(k) if k in ENV_FIRST else len(ENV_FIRST), k)):
        a, b = old.get(key, set()), new.get(key, set())
        if a == b:
            continue
        detail = ""
        if key == "cpu.flags":
            was, now = set(" ".join(a).split()), set(" ".join(b).split())
            detail = " ".join([*(f"+{f}" for f in sorted(now - was)), *(f"-{f}" for f in sorted(was - now))])
        rows.append({"key": key, "before": " | ".join(sorted(a)) or "(absent)",
                     "after": " | ".join(sorted(b)) or "(absent)", "difference": detail})
    return pd.DataFrame(rows, columns=["key", "before", "after", "difference"])
