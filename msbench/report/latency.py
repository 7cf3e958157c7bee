"""Inference latency against batch size per chip (scenario = "inference" records).

A measured record has p50/p90/p99 of its calls; a prediction has one value, shown as its p50.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from msbench.records import Record
from msbench.report.plots import panels, to_png


def batch_of(record: Record) -> int | None:
    """Samples per call: what the real target called with, or what the model predicted for."""
    m = record.metrics
    value = m.extra.get("batch_size") or (m.extra.get("detail") or {}).get("samples_per_step")
    return int(value) if value else None


def latency_table(records: Sequence[Record]) -> pd.DataFrame:
    rows = []
    for r in records:
        if r.cell.scenario != "inference":
            continue
        lat = r.metrics.latency_s
        rows.append({"workload": r.cell.workload, "preset": r.cell.preset, "target": r.cell.target,
                     "label": r.cell.label, "status": r.status, "batch": batch_of(r),
                     **{f"{p}_ms": (lat[p] * 1e3 if p in lat else None) for p in ("p50", "p90", "p99")},
                     "throughput": r.metrics.throughput, "runtime": r.metrics.extra.get("runtime", "device model"),
                     "cell_id": r.cell_id})
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["workload", "preset", "target", "batch"], kind="stable").reset_index(drop=True)


def latency_plot(table: pd.DataFrame) -> bytes | None:
    """One panel per workload: p50 latency (ms) against batch size, one line per target (log-log)."""
    ok = table[(table["status"] == "ok") & table["p50_ms"].notna() & table["batch"].notna()] if not table.empty else table
    if ok.empty:
        return None
    groups = list(ok.groupby(["workload", "preset"], sort=True))[:12]
    fig, axes = panels(len(groups))
    for ax, ((workload, preset), rows) in zip(axes, groups):
        for target, line in rows.groupby("target", sort=True):
            line = line.sort_values("batch")
            ax.plot(line["batch"], line["p50_ms"], marker="o", label=target)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{workload} ({preset})", fontsize=9)
        ax.set_xlabel("batch size")
        ax.set_ylabel("p50 latency (ms)")
        ax.legend(fontsize=7)
    return to_png(fig)
