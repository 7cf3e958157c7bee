"""Commit diff: the same cells (and asv benchmarks) at two commits, direction-aware, regressions first.

Throughput and accuracy are higher-is-better, times and memory lower-is-better (asv's own compare
assumes lower for everything). A relative change beyond `threshold` counts; accuracy (and any
metric in pp) is compared in percentage points against the accuracy tolerance. A cell that was ok
and is no longer ok is a regression whatever its numbers.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from msbench.records import Record
from msbench.report.load import RecordSet

# metric -> +1 higher is better, -1 lower is better
RECORD_METRICS: dict[str, int] = {"throughput": 1, "step_time_s": -1, "peak_memory_bytes": -1,
                                  "accuracy": 1, "compile_time_s": -1}
DIFF_COLUMNS = ["change", "source", "item", "metric", "before", "after", "delta", "unit", "cell_id"]
ORDER = {"regressed": 0, "improved": 1, "same": 2}
ENV_FIRST = ("mindspore", "numpy", "cpu.flags", "python", "cpu.model", "env.ONEDNN_MAX_CPU_ISA")
IGNORED_PROVENANCE = ("started", "commit", "dirty")


def direction_of(name: str) -> int:
    lowered = name.lower()
    if any(w in lowered for w in ("drop", "loss", "error", "time", "seconds", "memory", "peak", "bytes")):
        return -1
    return 1 if any(w in lowered for w in ("throughput", "accuracy", "samples_per", "speedup")) else -1


def judge(name: str, before: float, after: float, direction: int, threshold: float,
          tolerance_pp: float) -> tuple[str, float, str]:
    """(change, delta, unit): pp metrics by absolute difference, the rest by relative change."""
    if name == "accuracy" or name.endswith("_pp"):
        delta = (after - before) * (100.0 if name == "accuracy" else 1.0)
        limit, unit = tolerance_pp, "pp"
    else:
        if before == 0:
            return ("same" if after == 0 else ("improved" if direction * after > 0 else "regressed")), float("nan"), "%"
        delta = (after / before - 1.0) * 100.0
        limit, unit = threshold * 100.0, "%"
    goodness = direction * delta
    change = "improved" if goodness > limit else "regressed" if goodness < -limit else "same"
    return change, delta, unit


def record_diff(before: RecordSet, after: RecordSet, threshold: float, tolerance_pp: float) -> pd.DataFrame:
    rows = []
    old = {r.cell_id: r for r in before.records}
    for rec in after.records:
        prev = old.get(rec.cell_id)
        if prev is None:
            continue
        item = f"{rec.cell.workload} {rec.cell.label} on {rec.cell.target}"
        common = {"source": "run", "item": item, "cell_id": rec.cell_id}
        if prev.status != rec.status:
            change = "regressed" if prev.status == "ok" else "improved" if rec.status == "ok" else "same"
            rows.append({**common, "change": change, "metric": "status", "before": prev.status,
                         "after": rec.status if rec.status == "ok" else f"{rec.status}: {rec.reason or ''}",
                         "delta": float("nan"), "unit": ""})
            continue
        for name, direction in RECORD_METRICS.items():
            a, b = getattr(prev.metrics, name), getattr(rec.metrics, name)
            if a is None or b is None:
                continue
            change, delta, unit = judge(name, float(a), float(b), direction, threshold, tolerance_pp)
            rows.append({**common, "change": change, "metric": name, "before": a, "after": b,
                         "delta": delta, "unit": unit})
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def asv_diff(frame: pd.DataFrame, before: str, after: str, threshold: float, tolerance_pp: float) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    a = ok[ok["commit"].str.startswith(before)].set_index(["machine", "benchmark", "params"])["value"]
    b = ok[ok["commit"].str.startswith(after)].set_index(["machine", "benchmark", "params"])["value"]
    rows = []
    for key in a.index.intersection(b.index):
        machine, bench, params = key
        name = bench.rsplit(".", 1)[-1]
        change, delta, unit = judge(name, float(a[key]), float(b[key]), direction_of(name), threshold, tolerance_pp)
        rows.append({"change": change, "source": f"asv {machine}", "item": f"{bench} [{params}]", "metric": name,
                     "before": a[key], "after": b[key], "delta": delta, "unit": unit, "cell_id": ""})
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def order_diff(frame: pd.DataFrame) -> pd.DataFrame:
    """Regressions first (worst first), then improvements (best first), then unchanged."""
    if frame.empty:
        return frame
    worst = frame["delta"].abs().fillna(float("inf"))
    return (frame.assign(_order=frame["change"].map(ORDER), _size=-worst)
            .sort_values(["_order", "_size", "item", "metric"], kind="stable")
            .drop(columns=["_order", "_size"]).reset_index(drop=True))


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
            gone = set(" ".join(a).split()) - set(" ".join(b).split())
            added = set(" ".join(b).split()) - set(" ".join(a).split())
            detail = " ".join([*(f"+{f}" for f in sorted(added)), *(f"-{f}" for f in sorted(gone))])
        rows.append({"key": key, "before": " | ".join(sorted(a)) or "(absent)",
                     "after": " | ".join(sorted(b)) or "(absent)", "difference": detail})
    return pd.DataFrame(rows, columns=["key", "before", "after", "difference"])
