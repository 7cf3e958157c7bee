"""`msbench measure WORKLOAD [--preset P] [--set KNOB=VALUE ...] [--versus KNOB=VALUE ...] [--accuracy] [--json]`:
one cell, for real, in several fresh processes; with `--versus`, an A/B pair measured interleaved."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from msbench.cell_run import run_cells
from msbench.commands.cell_args import cell_from_args
from msbench.console import print_table
from msbench.errors import UserError
from msbench.outputs import check_dir
from msbench.records import Record
from msbench.settings import make_settings, parse_assignments


def measure_command(args: argparse.Namespace) -> int:
    if args.wait_quiet < 0:
        raise UserError(f"--wait-quiet={args.wait_quiet:g} is not allowed; allowed: seconds >= 0")
    cell = cell_from_args(args, f"mindspore:{args.device}")
    cells = [cell]
    if args.versus:
        knobs = {**cell.settings.non_default(), **parse_assignments(args.versus)}
        cells.append(replace(cell, settings=make_settings(knobs, where="--versus")))
    options: dict[str, object] = {"accuracy": args.accuracy}
    if args.profile:                    # checked before the cell runs; the child works in a scratch folder
        options["profile_dir"] = str(check_dir("--profile-dir", args.profile_dir).resolve())
    records = run_cells(cells, options=options, timeout=args.timeout, wait_quiet_s=args.wait_quiet)
    if args.json:
        payload = [r.to_dict() for r in records]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2, sort_keys=True, default=str))
    else:
        for record in records:
            print_table(["field", "value"], summary_rows(record))
        if len(records) == 2:
            print(ratio_line(*records))
    return 0 if all(r.status in ("ok", "unsupported") for r in records) else 1


def ratio_line(a: Record, b: Record) -> str:
    """B's step time over A's, with the 95% interval from both cells' process intervals (relative
    half-widths add in quadrature for a ratio of independent estimates)."""
    sa, sb = a.metrics.step_time_stats, b.metrics.step_time_stats
    if sa is None or sb is None:
        return "B/A: not comparable (a cell has no measured step time)"
    half = (sa.ci95_rel ** 2 + sb.ci95_rel ** 2) ** 0.5
    ratio = sb.median / sa.median
    verdict = "no effect shown" if abs(ratio - 1) <= half * ratio else ("B slower" if ratio > 1 else "B faster")
    return f"B/A step time: {ratio:.4f} ± {half:.2%} (95%, interleaved processes): {verdict}"


def summary_rows(record: Record) -> list[list[object]]:
    m = record.metrics
    stats = m.step_time_stats
    rows: list[list[object]] = [["cell", record.cell.id], ["status", record.status]]
    if record.reason:
        rows.append(["reason", record.reason.strip().splitlines()[-1][:200]])
    if stats:
        rows += [["step time (median)", f"{stats.median:.6g} s"], ["IQR", f"{stats.iqr:.3g} s"],
                 ["CV", f"{stats.cv:.3f}"], ["95% CI (rel., over processes)", f"±{stats.ci95_rel:.2%}"],
                 ["process medians", ", ".join(f"{x:.6g}" for x in stats.process_medians)],
                 ["CV of process medians", "" if stats.process_cv is None else f"{stats.process_cv:.4f}"],
                 ["measured steps", len(stats.samples)], ["compile", f"{m.compile_time_s:.3f} s"],
                 ["throughput", f"{m.throughput:.4g} samples/s"]]
    cond = m.extra.get("conditions") or {}
    if cond.get("load_before"):
        rows.append(["machine (worst process)", f"load {cond['load_before'][0]:g} on {cond.get('cores')} cores, others "
                                                f"{cond.get('others_during', 0):.0%} busy, steal {cond.get('steal_during', 0):.0%}"])
    if m.peak_memory_bytes is not None:
        rows.append(["peak memory", f"{m.peak_memory_bytes / 2**20:.1f} MiB ({m.peak_memory_source})"])
    if m.accuracy is not None:
        rows.append([f"accuracy ({m.accuracy_metric})", f"{m.accuracy:.4f}"])
    for name, seconds in m.latency_s.items():
        rows.append([f"latency {name}", f"{seconds * 1e3:.4g} ms"])
    return rows + op_profile_rows(m.op_profile)


def op_profile_rows(profile: dict) -> list[list[object]]:
    """The Profiler summary's lines: where its files are, op time per step, the top op types."""
    if not profile:
        return []
    if "reason" in profile:
        return [["op profile", profile["reason"]]]
    rows: list[list[object]] = [["op profile", profile.get("dir", profile["source"])],
                                ["op time per step", f"{profile['total_s'] * 1e3:.4g} ms over {profile['steps']} steps"]]
    largest = sorted(profile["by_type"].items(), key=lambda kv: -kv[1]["s"])      # records store keys sorted
    for op_type, entry in largest[:5]:
        rows.append([f"  {op_type}", f"{entry['s'] * 1e3:.4g} ms ({entry['share']:.1%}, {entry['calls']:g} calls)"])
    return rows
