"""`msbench validate --profile cpu`: the device model against real runs of the same cells.

(`--profile ascend910a|ascend910b` compares against published Ascend runs instead:
hardware/validation/report.py; this module dispatches.)

Runs matrices/validation.toml on `mindspore:cpu` through the runner (resumable), predicts every
measured cell with the profile, and reports per-cell relative error, median |error| and Spearman
rank correlation of step time and peak memory, separately for the `fit` cells (the ones the cpu
profile was fitted to) and the disjoint `validate` cells (the honest figures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from msbench.cell import Cell
from msbench.records import Record

from msbench.resources import suite_path
VALIDATION_MATRIX = suite_path("matrices/validation.toml")
REAL_TARGET = "mindspore:cpu"
RUN_ID = "validation-mindspore-cpu"
GOALS = {"step_median_abs_error": 0.15, "step_spearman": 0.90, "memory_median_abs_error": 0.25}   # issue 11's
# A short measurement protocol keeps the whole matrix near ten minutes here (still >= 5 steps a cell).
QUICK_PROTOCOL = {"MSBENCH_MEASURE_TIME_BUDGET_S": "6", "MSBENCH_MEASURE_MAX_STEPS": "30",
                  "MSBENCH_MEASURE_CI_TARGET": "0.03"}


def split_of(cell: Cell) -> str:
    """`fit` for a tiny preset as shipped, `validate` for any resized one (see the matrix's header)."""
    return "fit" if not cell.overrides else "validate"


@dataclass(frozen=True)
class Comparison:
    cell_id: str
    workload: str
    overrides: str
    label: str
    split: str
    measured_step_s: float
    predicted_step_s: float
    step_error: float                 # predicted / measured - 1
    measured_memory_bytes: int | None
    predicted_memory_bytes: int
    memory_error: float | None
    bound: str


def relative_error(predicted: float, measured: float | None) -> float | None:
    return predicted / measured - 1.0 if measured else None


def compare(record: Record, profile: str) -> Comparison:
    from hardware.model.outcome import predict_cell

    cell = record.cell
    pred = predict_cell(cell, profile).prediction
    measured = record.metrics.step_time_s or 0.0
    mem = record.metrics.peak_memory_bytes
    return Comparison(
        cell_id=cell.id, workload=cell.workload, label=cell.label, split=split_of(cell),
        overrides=",".join(f"{k}={v}" for k, v in sorted(cell.overrides.items())) or "-",
        measured_step_s=measured, predicted_step_s=pred.step_time_s,
        step_error=pred.step_time_s / measured - 1.0, measured_memory_bytes=mem,
        predicted_memory_bytes=pred.peak_memory_bytes, memory_error=relative_error(pred.peak_memory_bytes, mem),
        bound=pred.bound)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None                       # undefined for fewer than 3 points or a constant side
    from scipy.stats import spearmanr

    return float(spearmanr(xs, ys).statistic)


def summarize(rows: Sequence[Comparison]) -> dict[str, Any]:
    with_mem = [r for r in rows if r.memory_error is not None]
    return {
        "cells": len(rows),
        "step_median_abs_error": statistics.median(abs(r.step_error) for r in rows) if rows else None,
        "step_spearman": spearman([r.measured_step_s for r in rows], [r.predicted_step_s for r in rows]),
        "memory_cells": len(with_mem),
        "memory_median_abs_error": statistics.median(abs(r.memory_error) for r in with_mem) if with_mem else None,
        "memory_spearman": spearman([r.measured_memory_bytes for r in with_mem],
                                    [r.predicted_memory_bytes for r in with_mem]),
    }


def goals_met(summary: dict[str, Any]) -> dict[str, bool]:
    def ok(name: str, better: str) -> bool:
        value = summary.get(name)
        return value is not None and (value <= GOALS[name] if better == "low" else value >= GOALS[name])

    return {"step_median_abs_error": ok("step_median_abs_error", "low"), "step_spearman": ok("step_spearman", "high"),
            "memory_median_abs_error": ok("memory_median_abs_error", "low")}


def measured_records(run_path: Path) -> list[Record]:
    from msbench.store import RunStore

    return [r for r in RunStore(run_path).load() if r.status == "ok" and r.metrics.step_time_s]


def run_real(out: Path, resume: bool, progress: bool) -> Path:
    from msbench.runner import run_matrix

    for name, value in QUICK_PROTOCOL.items():
        os.environ.setdefault(name, value)
    path = out / f"{RUN_ID}.jsonl"
    if path.exists() and not resume:      # already measured: compare again (e.g. after refitting)
        print(f"msbench validate: reusing the measurements in {path} (--resume continues an interrupted "
              "run; delete the file to measure again)", file=sys.stderr)
        return path
    return run_matrix(VALIDATION_MATRIX, target=REAL_TARGET, out=out, run_id=RUN_ID, resume=resume,
                      progress=progress).path


def fit_cases(run_path: str | Path, profile: str) -> list:
    """The measured `fit` cells as FitCases (graph, settings, host cost, measurements) for fit.py."""
    from hardware.model.fit import FitCase
    from hardware.model.inputs import plan_graph, plan_host
    from hardware.model.plan import resolve
    from hardware.model.profile import load_profile

    prof = load_profile(profile)
    cases = []
    for r in measured_records(Path(run_path)):
        c = r.cell
        if split_of(c) != "fit":
            continue
        plan = resolve(c, prof)
        cases.append(FitCase(graph=plan_graph(plan), settings=c.settings, host=plan_host(plan),
                             step_time_s=r.metrics.step_time_s, peak_memory_bytes=r.metrics.peak_memory_bytes))
    return cases


def measured_cpus(records: Sequence[Record]) -> list[str]:
    """The CPU models (provenance.cpu.model) the records were measured on."""
    return sorted({str((r.provenance.get("cpu") or {}).get("model", "")) for r in records})


def cpu_profiles() -> list[str]:
    """The cpu-kind profiles: the ones validated against real runs here."""
    from hardware.model.profile import load_profile, profile_names

    return [name for name in profile_names() if load_profile(name).profile.kind == "cpu"]


def cpu_identity(profile: str, records: Sequence[Record]) -> dict[str, Any]:
    """The CPU the profile was fitted on against the CPU(s) the run measured. This machine kind is not
    one CPU (AMD EPYC on one day, an Intel Xeon 1.7x faster (median) on another), and a fit predicts its own,
    so a comparison across CPUs measures the change of CPU as much as the model."""
    from hardware.model.profile import load_profile

    fitted = load_profile(profile).profile.fitted_cpu
    measured = measured_cpus(records)
    alternatives = [name for name in cpu_profiles()
                    if name != profile and measured == [load_profile(name).profile.fitted_cpu]]
    return {"fitted_cpu": fitted, "measured_cpu": measured, "same_cpu": bool(fitted) and measured == [fitted],
            "profiles_fitted_on_the_measured_cpu": alternatives}


def report(rows: list[Comparison], profile: str, run_path: Path, records: Sequence[Record]) -> dict[str, Any]:
    splits = {s: summarize([r for r in rows if r.split == s]) for s in ("fit", "validate")}
    return {"profile": profile, "real_target": REAL_TARGET, "run": str(run_path), "goals": GOALS,
            "cpu": cpu_identity(profile, records), "summary": splits,
            "validate_goals_met": goals_met(splits["validate"]), "cells": [asdict(r) for r in rows]}


def cpu_warning(cpu: dict[str, Any], profile: str) -> str | None:
    if cpu["same_cpu"]:
        return None
    fitted = cpu["fitted_cpu"] or "a CPU it does not name"
    hint = (f"; profile(s) fitted on this CPU: {', '.join(cpu['profiles_fitted_on_the_measured_cpu'])}"
            if cpu["profiles_fitted_on_the_measured_cpu"] else "")
    return (f"note: the {profile} profile was fitted on {fitted}; these runs measured "
            f"{' and '.join(cpu['measured_cpu']) or 'an unrecorded CPU'}, so the errors include the change of CPU{hint}")


def print_report(data: dict[str, Any]) -> None:
    from msbench.cli import print_table

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
    from hardware.validation.cases import load_catalogue
    from hardware.validation.report import evaluate, render

    part = "locked" if args.locked else "dev"
    data = evaluate(load_catalogue(), args.profile, skip=args.skip or (), part=part)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.profile if part == "dev" else f"{args.profile}-{part}"
    (out / f"validation-report-{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    print(json.dumps(data, sort_keys=True) if args.json else render(data))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    from hardware.model.profile import load_profile
    from hardware.validation.cases import load_catalogue
    from msbench.errors import ConfigError
    from msbench.outputs import check_dir

    load_profile(args.profile)                  # an unknown name is refused with the names allowed
    check_dir("--out", args.out)                # before any cell runs
    from hardware.validation.measured import measured_command, wants_measured

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
