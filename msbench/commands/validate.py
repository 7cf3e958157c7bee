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
from hardware.validation.cpu import REAL_TARGET, RUN_ID, VALIDATION_MATRIX, compare, cpu_profiles, cpu_warning, report
from hardware.validation.report import evaluate, render
from msbench.cli import print_table
from msbench.errors import ConfigError
from msbench.outputs import check_dir
from msbench.runner import run_matrix

# A short measurement protocol keeps the whole matrix near ten minutes here (still >= 5 steps a cell).
QUICK_PROTOCOL = {"MSBENCH_MEASURE_TIME_BUDGET_S": "6", "MSBENCH_MEASURE_MAX_STEPS": "30",
                  "MSBENCH_MEASURE_CI_TARGET": "0.03"}


def run_real(out: Path, resume: bool, progress: bool) -> Path:
    for name, value in QUICK_PROTOCOL.items():
        os.environ.setdefault(name, value)
    path = out / f"{RUN_ID}.jsonl"
    if path.exists() and not resume:      # already measured: compare again (e.g. after refitting)
        print(f"msbench validate: reusing the measurements in {path} (--resume continues an interrupted "
              "run; delete the file to measure again)", file=sys.stderr)
        return path
    return run_matrix(VALIDATION_MATRIX, target=REAL_TARGET, out=out, run_id=RUN_ID, resume=resume,
                      progress=progress).path


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
        def fmt(x: float | None, spec: str) -> str:
            return "-" if x is None else format(x, spec)
        print(f"{split:>8}: {s['cells']} cells; step median |err| {fmt(s['step_median_abs_error'], '.1%')}, "
              f"Spearman {fmt(s['step_spearman'], '.3f')}; memory median |err| "
              f"{fmt(s['memory_median_abs_error'], '.1%')} ({s['memory_cells']} cells), "
              f"Spearman {fmt(s['memory_spearman'], '.3f')}")
    goals = ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in data["validate_goals_met"].items())
    print(f"goals on the validate cells ({data['goals']}): {goals}")
    if (warning := cpu_warning(data["cpu"], data["profile"])) is not None:
        print(warning)


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
    if not real_runs:
        chips = sorted({c.profile for c in load_catalogue().expressible()})
        if args.profile not in chips:
            raise ConfigError("profile", args.profile, ", ".join([*cpu_profiles(), *chips]),
                              rule="validation data exists for the cpu profiles (real runs here) and these published chips")
        return published_command(args)
    out = Path(args.out)
    run_path = run_real(out, args.resume, progress=not args.json)
    records = measured_records(run_path)
    data = report([compare(r, args.profile) for r in records], args.profile, run_path, records)
    (out / f"validation-report-{args.profile}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        print_report(data)
    return 0
