"""Trade-offs: throughput against peak memory per context, the Pareto front and accuracy outliers.

A cell is Pareto-optimal when no other admissible cell of its context has at least its throughput
with at most its peak memory (one of the two strictly better). Cells whose accuracy dropped by
more than the tolerance are marked and are not admissible; cells without accuracy are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from msbench.report.frame import GIB, accuracy_delta, base_of, contexts, metric

TRADEOFF_COLUMNS = ["workload", "preset", "target", "label", "throughput", "peak_gib",
                    "accuracy_delta_pp", "over_tolerance", "pareto", "cell_id"]


def pareto_mask(throughput: np.ndarray, memory: np.ndarray, admissible: np.ndarray) -> np.ndarray:
    """True where a point is admissible and not dominated by another admissible point."""
    thr, mem = throughput[:, None], memory[:, None]
    no_worse = (throughput[None, :] >= thr) & (memory[None, :] <= mem)
    better = (throughput[None, :] > thr) | (memory[None, :] < mem)
    dominated = (no_worse & better & admissible[None, :]).any(axis=1)
    return admissible & ~dominated


def tradeoffs(frame: pd.DataFrame, tolerance_pp: float) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for name, cells in contexts(frame):
        base = base_of(cells)
        ok = cells[(cells["status"] == "ok")]
        points = []
        for _, row in ok.iterrows():
            thr, peak = metric(row, "throughput"), metric(row, "peak_memory_bytes")
            if thr is None or peak is None:
                continue
            delta = accuracy_delta(row, base)
            points.append({
                "workload": row["workload"], "preset": row["preset"], "target": row["target"],
                "label": row["label"], "throughput": thr, "peak_gib": peak / GIB,
                "accuracy_delta_pp": delta, "over_tolerance": delta is not None and delta < -tolerance_pp,
                "pareto": False, "cell_id": row["cell_id"],
            })
        if len(points) < len(cells):
            notes.append(f"{name}: {len(cells) - len(points)} of {len(cells)} cells have no throughput "
                         "and peak memory (not ok, or not measured) and are left out.")
        if not points:
            continue
        thr = np.array([p["throughput"] for p in points])
        mem = np.array([p["peak_gib"] for p in points])
        admissible = np.array([not p["over_tolerance"] for p in points])
        for point, flag in zip(points, pareto_mask(thr, mem, admissible)):
            point["pareto"] = bool(flag)
        rows.extend(points)
    table = pd.DataFrame(rows, columns=TRADEOFF_COLUMNS)
    if not table.empty:
        table = table.sort_values(["workload", "preset", "target", "throughput"],
                                  ascending=[True, True, True, False], kind="stable")
    return table.reset_index(drop=True), notes
