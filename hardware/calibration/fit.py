"""Fit the `cpu` profile's efficiencies and dispatch costs to real runs of the `fit` cells.

Only the profile's free parameters move (efficiency table values at fixed thresholds, per-op
dispatch, per-step round trip, workspace, fragmentation); the mechanisms are the ones every
profile uses. Step time: least squares on log(predicted / measured), so a 2x miss weighs the same
on a 5 ms and a 500 ms cell, with a robust (soft-L1) loss: on a shared machine a cell measured
during a neighbour's burst is an outlier, and must not drag every parameter. Memory: peak = (planned + workspace) x (1 + fragmentation) is linear
in (1 + f, workspace x (1 + f)), solved by least squares on relative error.

    python -m hardware.calibration.fit hardware/calibration/data/cpu_validation_run.jsonl [--profile cpu]

prints the fitted values as TOML lines for hardware/profiles/cpu.toml (or the --profile's), with the CPU
model the run was measured on, which the profile names as `fitted_cpu`. It refuses a run whose cells were
not measured quietly and comparably (msbench.conditions); `--accept-conditions REASON` fits anyway and
prints what it accepted and why, which the profile's header must repeat.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hardware.calibration.cpu_runs import measured_cpus, measured_records, split_of
from hardware.model.host_time import HostCostLike
from hardware.model.inputs import plan_graph, plan_host
from hardware.model.memory import estimate_memory
from hardware.model.opgraph import OpGraph
from hardware.model.plan import resolve
from hardware.model.predict import predict
from hardware.model.profile import EfficiencyTable, HardwareProfile, load_profile
from msbench.conditions import mixed, not_quiet, of_record
from msbench.settings import Settings

TABLES = ("cube.efficiency", "vector.efficiency", "memory.efficiency")
SCALARS = ("launch.pynative_us", "launch.graph_o0_us", "launch.graph_o1_us", "launch.step_us")
TIED = {"launch.graph_o2_us": "launch.graph_o0_us"}      # O2 runs kernel by kernel on the CPU backend
TABLE_START = 0.5           # every efficiency starts mid-range
FIT_START = {"launch.pynative_us": 1000.0, "launch.graph_o0_us": 10.0, "launch.graph_o1_us": 100.0,
             "launch.step_us": 10000.0}      # orders of magnitude, not earlier fits
ROBUST_SCALE = 0.2          # log-residual beyond which a cell counts as an outlier (~20%)
SCALAR_BOUNDS = {"launch.pynative_us": (0.1, 1e5), "launch.graph_o0_us": (0.1, 1e5),
                 "launch.graph_o1_us": (0.1, 1e5), "launch.step_us": (1.0, 1e6)}


@dataclass(frozen=True)
class FitCase:
    """One measured cell with everything the pure prediction needs."""

    graph: OpGraph
    settings: Settings
    host: HostCostLike
    step_time_s: float
    peak_memory_bytes: int | None


def get_path(profile: HardwareProfile, path: str) -> Any:
    section, key = path.split(".")
    return getattr(getattr(profile, section), key)


def with_values(profile: HardwareProfile, values: dict[str, Any]) -> HardwareProfile:
    """A copy of `profile` with dotted-path fields replaced (`{"launch.step_us": 300.0}`)."""
    sections: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        section, key = path.split(".")
        sections.setdefault(section, {})[key] = value
    changes = {s: dataclasses.replace(getattr(profile, s), **kv) for s, kv in sections.items()}
    return dataclasses.replace(profile, **changes)


def free_tables(base: HardwareProfile) -> tuple[str, ...]:
    """The efficiency tables the fit moves: none for a profile with `[kernel_classes]` (derived from per-op
    times measured on its CPU by hardware.calibration.derive), whose dispatch costs alone are fitted."""
    return () if base.kernel_classes is not None else TABLES


def profile_of(base: HardwareProfile, theta: Sequence[float]) -> HardwareProfile:
    values: dict[str, Any] = {}
    i = 0
    for path in free_tables(base):
        rows = get_path(base, path).rows
        values[path] = EfficiencyTable(tuple((t, float(theta[i + j])) for j, (t, _) in enumerate(rows)))
        i += len(rows)
    for path in SCALARS:
        values[path] = float(theta[i])
        i += 1
    for tied, source in TIED.items():
        values[tied] = values[source]
    return with_values(base, values)


def bounds_of(base: HardwareProfile) -> tuple[np.ndarray, np.ndarray]:
    lo: list[float] = []
    hi: list[float] = []
    for path in free_tables(base):
        n = len(get_path(base, path).rows)
        lo += [0.005] * n
        hi += [1.0] * n
    for path in SCALARS:
        lo.append(SCALAR_BOUNDS[path][0])
        hi.append(SCALAR_BOUNDS[path][1])
    return np.asarray(lo), np.asarray(hi)


def parameter_paths(base: HardwareProfile) -> list[str]:
    """The dotted path of each free parameter, in `profile_of`'s order (a table's rows repeat its path)."""
    return [path for path in free_tables(base) for _ in get_path(base, path).rows] + list(SCALARS)


def time_residuals(profile: HardwareProfile, cases: Sequence[FitCase]) -> np.ndarray:
    return np.asarray([np.log(predict(c.graph, c.settings, profile, c.host).step_time_s / c.step_time_s)
                       for c in cases])


def fit_time(base: HardwareProfile, cases: Sequence[FitCase]) -> HardwareProfile:
    from scipy.optimize import least_squares

    lo, hi = bounds_of(base)
    # A fixed start, not the profile's current values: some parameters are weakly determined (the memory
    # efficiency barely binds on this CPU), so starting from the last fit would drift from fit to fit and
    # the committed run would not regenerate the committed profile.
    start = np.clip(np.asarray([FIT_START.get(path, TABLE_START) for path in parameter_paths(base)]), lo, hi)
    result = least_squares(lambda th: time_residuals(profile_of(base, th), cases), start, bounds=(lo, hi),
                           x_scale="jac", max_nfev=400, loss="soft_l1", f_scale=ROBUST_SCALE)
    return profile_of(base, result.x)


def fit_memory(base: HardwareProfile, cases: Sequence[FitCase]) -> HardwareProfile:
    """peak = static + (dynamic + workspace) x (1 + f): linear in u = 1 + f and v = workspace x u."""
    bare = with_values(base, {"memory.workspace_mib": 0.0, "memory.fragmentation": 0.0})
    rows, target = [], []
    for c in cases:
        if not c.peak_memory_bytes:
            continue
        m = estimate_memory(c.graph, c.settings, bare, c.host.bytes_per_sample)
        static = m.params + m.optimizer_states + (m.accumulation or 0)
        rows.append([(m.peak - static) / c.peak_memory_bytes, 1.0 / c.peak_memory_bytes])
        target.append(1.0 - static / c.peak_memory_bytes)
    if len(rows) < 2:
        return base
    (u, v), *_ = np.linalg.lstsq(np.asarray(rows), np.asarray(target), rcond=None)
    u = max(float(u), 1.0)
    workspace_mib = max(float(v) / u, 0.0) / 2**20
    return with_values(base, {"memory.fragmentation": u - 1.0, "memory.workspace_mib": workspace_mib})


def toml_lines(profile: HardwareProfile) -> list[str]:
    lines = []
    for path in free_tables(profile):
        rows = ", ".join(f"[{t:g}, {e:.3f}]" for t, e in get_path(profile, path).rows)
        lines.append(f"{path} = [{rows}]")
    for path in (*SCALARS, *TIED, "memory.workspace_mib", "memory.fragmentation"):
        lines.append(f"{path} = {get_path(profile, path):.3f}")
    return lines


def fit_cases(run_path: str | Path, profile: str) -> list[FitCase]:
    """The run's measured `fit` cells as FitCases (graph, settings, host cost, measurements)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware.calibration.fit")
    parser.add_argument("run", help="a run of matrices/validation.toml on mindspore:cpu (JSONL)")
    parser.add_argument("--profile", default="cpu", help="the cpu-kind profile whose free parameters are fitted")
    parser.add_argument("--accept-conditions", metavar="REASON", help="fit a run that the conditions rule flags")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    accepted = None if args.accept_conditions is None else args.accept_conditions.strip()
    if accepted == "":
        parser.print_usage(sys.stderr)
        print("fit: error: --accept-conditions needs a reason (it goes into the profile's header)", file=sys.stderr)
        return 2
    records = measured_records(Path(args.run))
    # Constants fitted to a loaded machine absorb its time-slicing (steps here are ~2x slower loaded),
    # and fitting to a mix averages two machines: refuse both, and say which cell and why.
    labelled = [(f"{r.cell.workload} {r.cell.label}", of_record(r)) for r in records]
    loaded = [(label, why) for label, why in ((label, not_quiet(cond)) for label, cond in labelled) if why]
    why = mixed(labelled) or (f"{len(loaded)} of {len(labelled)} cells were not measured on a quiet machine, "
                              f"first {loaded[0][0]}: {loaded[0][1]}" if loaded else None)
    cpus = measured_cpus(records)
    if len(cpus) != 1:       # one fit describes one CPU; no condition can be accepted across two
        print(f"fit: error: the run's cells were measured on {len(cpus)} CPU models ({', '.join(cpus)}); "
              "a profile is fitted to one", file=sys.stderr)
        return 2
    if why and not accepted:
        print(f"fit: error: the run's cells were not measured under quiet, comparable machine conditions ({why}); "
              "re-measure them with `msbench run --wait-quiet SECONDS` on a quiet machine, or fit anyway with "
              "--accept-conditions REASON (the reason is printed with the values, for the profile's header)",
              file=sys.stderr)
        return 2
    if why:
        print(f"# conditions: {why}; accepted because: {accepted}")
    base = load_profile(args.profile)
    if base.profile.kind != "cpu":
        print(f"fit: error: --profile {args.profile} is a {base.profile.kind} profile; allowed: a cpu-kind profile",
              file=sys.stderr)
        return 2
    cases = fit_cases(args.run, args.profile)
    fitted = fit_memory(fit_time(base, cases), cases)
    before = np.abs(time_residuals(base, cases))
    after = np.abs(time_residuals(fitted, cases))
    print(f"# {len(cases)} fit cells; median |log error| {np.median(before):.3f} -> {np.median(after):.3f}")
    print(f'profile.fitted_cpu = "{cpus[0]}"')
    print("\n".join(toml_lines(fitted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
