"""Per-op time of profiled real cells, and the device model's prediction of the same cell beside it.

A real record run with the Profiler (`msbench measure --profile`, matrix `profile = true`) carries the
per-op summary of hardware/mindspore/profiling.py; a `model:<profile>` record of a matrix with
`profile = true` carries the predicted per-op times in the same shape (hardware/op_times.py).
A measured cell on `mindspore:cpu` is paired with the `model:cpu` record of the same cell (same id but
for the target). Op types are matched by name (both sides are the CPU backend's kernels) and grouped by
hardware.model.opclass's classes, the ones the model's efficiencies are fitted per.
Error = predicted / measured - 1 of the op time per step; `error_with_dispatch` counts each predicted
kernel with its dispatch (on the CPU the host that dispatches is the one that computes).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import pandas as pd

from hardware.model.opclass import op_class
from msbench.records import Record

PAIRED_PROFILE = {"mindspore:cpu": "model:cpu"}     # the device-model profile that predicts a real target
TOP_TYPES = 12                                      # op types shown per cell (the rest summed as "other")


def profiled(records: Iterable[Record]) -> list[Record]:
    """Measured records with a per-op summary (not a reason)."""
    return [r for r in records if r.status == "ok" and not r.cell.target.startswith("model:")
            and r.metrics.op_profile.get("by_type")]


def top_kernels(records: Sequence[Record]) -> pd.DataFrame:
    rows = [{"workload": r.cell.workload, "scenario": r.cell.scenario, "target": r.cell.target, "rank": i + 1,
             "kernel": k["name"], "op_type": k["type"], "ms_per_step": k["s"] * 1e3, "share": k["share"],
             "cell_id": r.cell_id}
            for r in profiled(records) for i, k in enumerate(r.metrics.op_profile.get("top_kernels", []))]
    return pd.DataFrame(rows)


def prediction_of(record: Record, records: Sequence[Record]) -> Record | None:
    """The model record of the same cell on the profile paired with the record's target."""
    model = PAIRED_PROFILE.get(record.cell.target)
    if model is None:
        return None
    wanted = record.cell.with_target(model).id
    return next((r for r in records if r.cell_id == wanted and r.metrics.op_profile.get("by_type")), None)


def type_rows(record: Record, predicted: Record | None) -> list[dict[str, Any]]:
    """One row per op type of either side: measured and predicted ms per step, the error."""
    measured = record.metrics.op_profile["by_type"]
    model = predicted.metrics.op_profile["by_type"] if predicted else {}
    rows = []
    for op_type in sorted(set(measured) | set(model), key=lambda t: (-measured.get(t, {}).get("s", 0.0), t)):
        m, p = measured.get(op_type, {}).get("s"), model.get(op_type, {}).get("s")
        slot = model.get(op_type, {}).get("slot_s")
        rows.append({"workload": record.cell.workload, "preset": record.cell.preset, "scenario": record.cell.scenario,
                     "target": record.cell.target, "op_type": op_type, "op_class": op_class(op_type),
                     "measured_ms": None if m is None else m * 1e3,
                     "measured_share": measured.get(op_type, {}).get("share"),
                     "predicted_ms": None if p is None else p * 1e3, "error": error(p, m),
                     "predicted_with_dispatch_ms": None if slot is None else slot * 1e3,
                     "error_with_dispatch": error(slot, m),
                     "cell_id": record.cell_id, "model_cell_id": predicted.cell_id if predicted else None})
    return rows


def error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or not measured:
        return None
    return predicted / measured - 1.0


def by_op_type(records: Sequence[Record]) -> tuple[pd.DataFrame, list[str]]:
    """Measured vs predicted per op type (the TOP_TYPES largest measured per cell), with notes."""
    rows, notes = [], []
    for record in profiled(records):
        predicted = prediction_of(record, records)
        model = PAIRED_PROFILE.get(record.cell.target)
        if predicted is None:
            notes.append(f"{record.cell.workload} on {record.cell.target} ({record.cell_id}): " + (
                f"no profiled {model} record of the same cell to compare with (run the cell on {model} in a "
                "matrix with profile = true)" if model else
                "no device-model profile is paired with this target (its name does not say the chip), so "
                "only the measurement is shown"))
        cell_rows = type_rows(record, predicted)
        shown = cell_rows[:TOP_TYPES]
        rest = cell_rows[TOP_TYPES:]
        if rest:
            m = sum(r["measured_ms"] or 0.0 for r in rest)
            p = sum(r["predicted_ms"] or 0.0 for r in rest) if predicted else None
            slot = sum(r["predicted_with_dispatch_ms"] or 0.0 for r in rest) if predicted else None
            shown.append({**rest[0], "op_type": f"other ({len(rest)} types)", "op_class": "", "measured_ms": m,
                          "measured_share": sum(r["measured_share"] or 0.0 for r in rest), "predicted_ms": p,
                          "error": error(p, m), "predicted_with_dispatch_ms": slot, "error_with_dispatch": error(slot, m)})
        rows += shown
    return pd.DataFrame(rows), notes


def by_op_class(records: Sequence[Record]) -> pd.DataFrame:
    """Measured vs predicted per op class (every op type of the cell, summed), and the whole op time."""
    rows = []
    for record in profiled(records):
        predicted = prediction_of(record, records)
        if predicted is None:
            continue
        columns = ["measured_ms", "predicted_ms", "predicted_with_dispatch_ms"]
        frame = pd.DataFrame(type_rows(record, predicted)).fillna({c: 0.0 for c in columns})
        sums = frame.groupby("op_class")[columns].sum()
        sums.loc["all op time"] = sums.sum()
        for name, row in sums.iterrows():
            rows.append({"workload": record.cell.workload, "preset": record.cell.preset,
                         "scenario": record.cell.scenario, "op_class": name, "measured_ms": row["measured_ms"],
                         "predicted_ms": row["predicted_ms"], "error": error(row["predicted_ms"], row["measured_ms"]),
                         "predicted_with_dispatch_ms": row["predicted_with_dispatch_ms"],
                         "error_with_dispatch": error(row["predicted_with_dispatch_ms"], row["measured_ms"]),
                         "cell_id": record.cell_id, "model_cell_id": predicted.cell_id})
    return pd.DataFrame(rows)
