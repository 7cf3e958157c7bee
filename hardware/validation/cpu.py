"""The device model against real runs of the same cells on this CPU (`msbench validate --profile cpu`; the
command, which runs matrices/validation.toml on `mindspore:cpu` through the runner, is
msbench/commands/validate.py).

Predicts every measured cell with the profile, and reports per-cell relative error, median |error| and
Spearman rank correlation of step time and peak memory, separately for the `fit` cells (the ones the cpu
profile was fitted to, hardware/calibration/fit.py; the split is hardware/calibration/cpu_runs.py) and the
disjoint `validate` cells (the honest figures).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from hardware.calibration.cpu_runs import measured_cpus, split_of
from hardware.model.outcome import predict_cell
from hardware.validation.intervals import median_interval, spearman_interval
from hardware.model.profile import load_profile, profile_names
from msbench.records import Record
from msbench.resources import suite_path

VALIDATION_MATRIX = suite_path("matrices/validation.toml")
REAL_TARGET = "mindspore:cpu"
RUN_ID = "validation-mindspore-cpu"
GOALS = {"step_median_abs_error": 0.15, "step_spearman": 0.90, "memory_median_abs_error": 0.25}   # issue 11's


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
    """Median |error| and Spearman of step time and memory, each with its 95% interval (intervals.py)."""
    with_mem = [r for r in rows if r.memory_error is not None]
    step_err = [abs(r.step_error) for r in rows]
    mem_err = [abs(r.memory_error) for r in with_mem if r.memory_error is not None]
    step_xy = ([r.measured_step_s for r in rows], [r.predicted_step_s for r in rows])
    mem_xy = ([float(r.measured_memory_bytes or 0) for r in with_mem], [float(r.predicted_memory_bytes) for r in with_mem])
    return {
        "cells": len(rows),
        "step_median_abs_error": statistics.median(step_err) if rows else None,
        "step_median_abs_error_ci95": median_interval(step_err),
        "step_spearman": spearman(*step_xy),
        "step_spearman_ci95": spearman_interval(*step_xy),
        "memory_cells": len(with_mem),
        "memory_median_abs_error": statistics.median(mem_err) if with_mem else None,
        "memory_median_abs_error_ci95": median_interval(mem_err),
        "memory_spearman": spearman(*mem_xy),
        "memory_spearman_ci95": spearman_interval(*mem_xy),
    }


def goals_met(summary: dict[str, Any]) -> dict[str, bool]:
    def ok(name: str, better: str) -> bool:
        value = summary.get(name)
        return value is not None and (value <= GOALS[name] if better == "low" else value >= GOALS[name])

    return {"step_median_abs_error": ok("step_median_abs_error", "low"), "step_spearman": ok("step_spearman", "high"),
            "memory_median_abs_error": ok("memory_median_abs_error", "low")}


def cpu_profiles() -> list[str]:
    """The cpu-kind profiles: the ones validated against real runs here."""
    return [name for name in profile_names() if load_profile(name).profile.kind == "cpu"]


def cpu_identity(profile: str, records: Sequence[Record]) -> dict[str, Any]:
    """The CPU the profile was fitted on against the CPU(s) the run measured. This machine kind is not
    one CPU (AMD EPYC on one day, an Intel Xeon 1.7x faster (median) on another), and a fit predicts its own,
    so a comparison across CPUs measures the change of CPU as much as the model."""
    fitted = load_profile(profile).profile.fitted_cpu
    measured = measured_cpus(records)
    alternatives = [name for name in cpu_profiles()
                    if name != profile and measured == [load_profile(name).profile.fitted_cpu]]
    return {"fitted_cpu": fitted, "measured_cpu": measured, "same_cpu": bool(fitted) and measured == [fitted],
            "profiles_fitted_on_the_measured_cpu": alternatives}


def report(rows: list[Comparison], profile: str, run_path: Path, records: Sequence[Record],
           selection: str = "") -> dict[str, Any]:
    """`selection` says which cells were measured (the default subset or the full matrix)."""
    splits = {s: summarize([r for r in rows if r.split == s]) for s in ("fit", "validate")}
    return {"profile": profile, "real_target": REAL_TARGET, "run": str(run_path), "goals": GOALS, "selection": selection,
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


