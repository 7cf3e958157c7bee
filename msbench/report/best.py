"""Best settings per context: the highest-throughput ok cell under a memory cap and an accuracy tolerance.

Without a cap, the device's own capacity is the cap (cells that did not fit are already `oom`).
A cell without an accuracy measurement is admitted, and the table says so.
"""

from __future__ import annotations

import pandas as pd

from msbench.report.frame import GIB, accuracy_delta, base_of, contexts, metric, ratio

BEST_COLUMNS = ["workload", "preset", "target", "label", "throughput", "speedup", "peak_gib",
                "accuracy_delta_pp", "admitted", "cell_id"]


def best_settings(frame: pd.DataFrame, memory_cap_gib: float | None,
                  tolerance_pp: float) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for name, cells in contexts(frame):
        base = base_of(cells)
        candidates = []
        for _, row in cells[cells["status"] == "ok"].iterrows():
            thr, peak = metric(row, "throughput"), metric(row, "peak_memory_bytes")
            if thr is None:
                continue
            if memory_cap_gib is not None and (peak is None or peak / GIB > memory_cap_gib):
                continue
            delta = accuracy_delta(row, base)
            if delta is not None and delta < -tolerance_pp:
                continue
            candidates.append((thr, row, peak, delta))
        if not candidates:
            cap = f"{memory_cap_gib:g} GiB" if memory_cap_gib is not None else "the device capacity"
            notes.append(f"{name}: no ok cell fits {cap} within {tolerance_pp:g} pp of accuracy loss.")
            continue
        thr, row, peak, delta = max(candidates, key=lambda c: c[0])
        rows.append({
            "workload": row["workload"], "preset": row["preset"], "target": row["target"],
            "label": row["label"], "throughput": thr,
            "speedup": ratio(thr, metric(base, "throughput")) if base is not None else None,
            "peak_gib": None if peak is None else peak / GIB,
            "accuracy_delta_pp": delta if delta is not None else None,
            "admitted": f"{len(candidates)} of {len(cells)}", "cell_id": row["cell_id"],
        })
        if delta is None:
            notes.append(f"{name}: the best cell ({row['label']}) has no accuracy measurement; "
                         "its accuracy cost is unknown.")
    return pd.DataFrame(rows, columns=BEST_COLUMNS), notes
