"""`msbench measure WORKLOAD [--preset P] [--set KNOB=VALUE ...] [--accuracy] [--json]`: one cell, for real."""

from __future__ import annotations

import argparse
import json

from msbench.cli import cell_from_args, print_table
from msbench.records import Record


def measure_command(args: argparse.Namespace) -> int:
    from msbench.runner import run_cell

    cell = cell_from_args(args, f"mindspore:{args.device}")
    record = run_cell(cell, options={"accuracy": args.accuracy}, timeout=args.timeout)
    if args.json:
        print(json.dumps(record.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        print_table(["field", "value"], summary_rows(record))
    return 0 if record.status in ("ok", "unsupported") else 1


def summary_rows(record: Record) -> list[list[object]]:
    m = record.metrics
    stats = m.step_time_stats
    rows: list[list[object]] = [["cell", record.cell.id], ["status", record.status]]
    if record.reason:
        rows.append(["reason", record.reason.strip().splitlines()[-1][:200]])
    if stats:
        rows += [["step time (median)", f"{stats.median:.6g} s"], ["IQR", f"{stats.iqr:.3g} s"],
                 ["CV", f"{stats.cv:.3f}"], ["95% CI of median (rel.)", f"±{stats.ci95_rel:.2%}"],
                 ["measured steps", len(stats.samples)], ["compile", f"{m.compile_time_s:.3f} s"],
                 ["throughput", f"{m.throughput:.4g} samples/s"]]
    if m.peak_memory_bytes is not None:
        rows.append(["peak memory", f"{m.peak_memory_bytes / 2**20:.1f} MiB ({m.peak_memory_source})"])
    if m.accuracy is not None:
        rows.append([f"accuracy ({m.accuracy_metric})", f"{m.accuracy:.4f}"])
    return rows
