"""Knob effects: every cell against its context's baseline cell, with the component that moved.

speed-up = throughput / baseline throughput; memory change = peak / baseline peak - 1 (%);
accuracy delta in pp, the mean of seed-paired differences with its 95% interval, called an effect only
when the interval excludes 0 (msbench.stats); the component that moved is the breakdown entry (compute, memory, host,
data, comm...) whose seconds per step changed most, with that change in ms.
"""

from __future__ import annotations

import pandas as pd

from msbench.report.frame import (BASE_LABEL, base_of, brief, component_columns, contexts, effect_text, metric,
                                  accuracy_delta_interval, ratio)

EFFECT_COLUMNS = ["workload", "preset", "target", "label", "status", "speedup", "memory_change_pct",
                  "accuracy_delta_pp", "accuracy_ci95_pp", "accuracy_effect", "lr_rule", "moved", "moved_ms", "bound", "cell_id"]


def moved_component(row: pd.Series, base: pd.Series, columns: list[str]) -> tuple[str | None, float | None]:
    """The breakdown component with the largest absolute change, and its change in ms."""
    best: tuple[str | None, float | None] = (None, None)
    for col in columns:
        new, old = metric(row, col), metric(base, col)
        if new is None and old is None:
            continue
        change = (new or 0.0) - (old or 0.0)
        if best[1] is None or abs(change) > abs(best[1]):
            best = (col.removeprefix("component."), change)
    if best[1] is None:
        return None, None
    return best[0], best[1] * 1000.0


def knob_effects(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per non-baseline cell; notes name the contexts without an ok baseline."""
    rows, notes = [], []
    parts = component_columns(frame)
    for name, cells in contexts(frame):
        base = base_of(cells)
        others = cells[cells["label"] != BASE_LABEL]
        if base is None:
            status = cells.loc[cells["label"] == BASE_LABEL, "status"]
            why = f"its baseline cell is {status.iloc[0]}" if len(status) else "it has no baseline cell (label 'base')"
            notes.append(f"{name}: no knob effects, {why}.")
            continue
        if others.empty:
            notes.append(f"{name}: only the baseline cell, nothing to compare.")
        mixed = others[(others["status"] == "ok") & (others.get("made_at") != base.get("made_at"))] \
            if "made_at" in others.columns else others.iloc[:0]
        if len(mixed):
            notes.append(f"{name}: {len(mixed)} cell(s) were made at another commit than the baseline "
                         f"({str(base['made_at'])[:10]}); their differences mix code changes with knob effects.")
        for _, row in others.iterrows():
            ok = row["status"] == "ok"
            speed = ratio(metric(row, "throughput"), metric(base, "throughput")) if ok else None
            mem = ratio(metric(row, "peak_memory_bytes"), metric(base, "peak_memory_bytes")) if ok else None
            moved, moved_ms = moved_component(row, base, parts) if ok else (None, None)
            delta, interval = accuracy_delta_interval(row, base) if ok else (None, None)
            run = row.get("extra.accuracy_run")
            rows.append({
                "workload": row["workload"], "preset": row["preset"], "target": row["target"],
                "label": row["label"], "status": row["status"] if ok else f"{row['status']}: {brief(row.get('reason'))}".rstrip(": "),
                "speedup": speed, "memory_change_pct": None if mem is None else (mem - 1.0) * 100.0,
                "accuracy_delta_pp": delta,
                "accuracy_ci95_pp": None if interval is None else f"[{interval[0]:+.2f}, {interval[1]:+.2f}]",
                "accuracy_effect": effect_text(interval) if ok else "",
                "lr_rule": run.get("lr_rule") if isinstance(run, dict) else None,
                "moved": moved, "moved_ms": moved_ms, "bound": row.get("bound") if ok else None,
                "cell_id": row["cell_id"],
            })
    table = pd.DataFrame(rows, columns=EFFECT_COLUMNS)
    if not table.empty:
        table = table.sort_values(["workload", "preset", "target", "speedup"],
                                  ascending=[True, True, True, False], na_position="last", kind="stable")
    return table.reset_index(drop=True), notes
