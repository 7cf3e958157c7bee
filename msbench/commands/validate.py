"""`msbench validate --profile P`: the device model against measurements. A cpu-kind profile runs
matrices/validation.toml on `mindspore:cpu` through the runner (resumable) and compares
(hardware/validation/cpu.py); an Ascend profile predicts that chip's published runs, nothing run for real
(hardware/validation/report.py). This module dispatches and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from hardware.model.profile import load_profile
from hardware.validation.cases import load_catalogue
from hardware.calibration.cpu_runs import measured_records
from hardware.validation.measured import measured_command, wants_measured
from hardware.validation.cpu_subset import quick_cells
from hardware.validation.cpu import REAL_TARGET, RUN_ID, VALIDATION_MATRIX, compare, cpu_profiles, cpu_warning, report
from hardware.validation.report import evaluate, render
from msbench.console import print_table
from msbench.errors import ConfigError
from msbench.matrix_file import load_matrix
from msbench.outputs import check_dir
from msbench.runner import run_matrix

# A short measurement protocol per process (still >= 5 steps); the committed --full runs used it with up to
# 6 processes a cell (48-96 minutes here). The default measures the subset of cpu_subset.py in 3 processes
# a cell (their median was within 3% of the 6 processes' median for half the committed cells, 5-18% at
# the 90th percentile): 587 s of the committed EPYC run's cell times, plus extractions (docs/validation.md).
SHORT_STEPS = {"MSBENCH_MEASURE_TIME_BUDGET_S": "6", "MSBENCH_MEASURE_MAX_STEPS": "30",
               "MSBENCH_MEASURE_CI_TARGET": "0.03"}
QUICK_PROTOCOL = {**SHORT_STEPS, "MSBENCH_MEASURE_PROCESSES": "3", "MSBENCH_MEASURE_MAX_PROCESSES": "3"}
FULL_PROTOCOL = SHORT_STEPS


def run_real(out: Path, resume: bool, progress: bool, full: bool = False) -> Path:
    """The measured run (reused when it exists): the whole matrix with `full`, else the default subset."""
    for name, value in (FULL_PROTOCOL if full else QUICK_PROTOCOL).items():
        os.environ.setdefault(name, value)
    run_id = RUN_ID if full else f"{RUN_ID}-quick"
    path = out / f"{run_id}.jsonl"
    if path.exists() and not resume:      # already measured: compare again (e.g. after refitting)
        print(f"msbench validate: reusing the measurements in {path} (--resume continues an interrupted "
              "run; delete the file to measure again)", file=sys.stderr)
        return path
    only = None if full else {c.id for c in quick_cells(load_matrix(VALIDATION_MATRIX, target=REAL_TARGET).expand().cells())}
    return run_matrix(VALIDATION_MATRIX, target=REAL_TARGET, out=out, run_id=run_id, resume=resume,
                      progress=progress, only=only).path


def with_ci(summary: dict[str, Any], name: str, spec: str) -> str:
    """`12.0% [95%: 7.1-20.3%]`: a statistic and its interval; `-` where there are too few cells."""
    value, ci = summary.get(name), summary.get(f"{name}_ci95")
    if value is None:
        return "-"
    return format(value, spec) + ("" if ci is None else f" [95%: {format(ci[0], spec)} to {format(ci[1], spec)}]")


def print_report(data: dict[str, Any]) -> None:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    rows = sorted(data["cells"], key=lambda r: (r["split"], r["workload"], r["overrides"], r["label"]))
    print_table(["split", "workload", "overrides", "label", "measured ms", "model ms", "step err",
                 "measured MiB", "model MiB", "mem err", "bound"],
                [[r["split"], r["workload"], r["overrides"], r["label"], f"{r['measured_step_s'] * 1e3:.1f}",
                  f"{r['predicted_step_s'] * 1e3:.1f}", pct(r["step_error"]),
                  "-" if r["measured_memory_bytes"] is None else f"{r['measured_memory_bytes'] / 2**20:.0f}",
                  f"{r['predicted_memory_bytes'] / 2**20:.0f}", pct(r["memory_error"]), r["bound"]] for r in rows])
    for split, s in data["summary"].items():
        print(f"{split:>8}: {s['cells']} cells; step median |err| {with_ci(s, 'step_median_abs_error', '.1%')}, "
              f"Spearman {with_ci(s, 'step_spearman', '.3f')}; memory median |err| "
              f"{with_ci(s, 'memory_median_abs_error', '.1%')} ({s['memory_cells']} cells), "
              f"Spearman {with_ci(s, 'memory_spearman', '.3f')}")
    if data.get("selection"):
        print(f"cells: {data['selection']}")
    goals = ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in data["validate_goals_met"].items())
    print(f"goals on the validate cells ({data['goals']}): {goals}")
    if (warning := cpu_warning(data["cpu"], data["profile"])) is not None:
        print(warning)


def selection_line(full: bool, measured: int) -> str:
    if full:
        return f"the full matrix ({measured} cells measured, up to 6 processes each)"
    return (f"the default subset ({measured} cells measured, 3 processes each; the rule: "
            "hardware/validation/cpu_subset.py; --full measures all 40)")


def published_command(args: argparse.Namespace) -> int:
    """Ascend profiles: predict the published runs of that chip (nothing is run for real)."""
    part = "locked" if args.locked else "dev"
    data = evaluate(load_catalogue(), args.profile, skip=args.skip or (), part=part)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.profile if part == "dev" else f"{args.profile}-{part}"
    (out / f"validation-report-{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    print(json.dumps(data, sort_keys=True) if args.json else render(data))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    load_profile(args.profile)                  # an unknown name is refused with the names allowed
    check_dir("--out", args.out)                # before any cell runs
    if wants_measured(args):
        return measured_command(args)           # the user's own runs, on any profile
    real_runs = args.profile in cpu_profiles()
    if real_runs and (args.skip or args.locked):
        raise ConfigError("--skip" if args.skip else "--locked", args.skip[0] if args.skip else True,
                          "only with a published-runs profile (--profile ascend910a|ascend910b)")
    if not real_runs and getattr(args, "full", False):
        raise ConfigError("--full", True, f"only with a cpu profile ({', '.join(cpu_profiles())}): the published "
                          "runs are always predicted in full")
    if not real_runs:
        chips = sorted({c.profile for c in load_catalogue().expressible()})
        if args.profile not in chips:
            raise ConfigError("profile", args.profile, ", ".join([*cpu_profiles(), *chips]),
                              rule="validation data exists for the cpu profiles (real runs here) and these published chips")
        return published_command(args)
    out = Path(args.out)
    run_path = run_real(out, args.resume, progress=not args.json, full=getattr(args, "full", False))
    records = measured_records(run_path)
    full = getattr(args, "full", False)
    data = report([compare(r, args.profile) for r in records], args.profile, run_path, records,
                  selection=selection_line(full, len(records)))
    (out / f"validation-report-{args.profile}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        print_report(data)
    return 0
