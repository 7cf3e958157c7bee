"""`msbench calibrate ascend WORKLOAD|--config FILE --profiler DIR... --name NAME`: a profile of the user's chip
from its profiler output.

Each `--profiler DIR` is one profiled run of the cell named by WORKLOAD, --preset, --set and --override (over
the workload's published recipe, as `msbench predict` starts), or by the user's own mindcv or mindyolo config
(`--config`, as `msbench predict --config` reads it); `DIR::KNOB=V,KNOB=V` gives one run knobs of its
own (another batch size, say). An LLM's card is joined to its blocks and ends composed as the prediction composes
them (hardware/model/llm/step_ops.py; a layout without pipeline stages). Every run is joined to the lowered graph
of its cell (the kernel-count match per type is printed), its kernels become per-op table rows, and hardware/calibration/user_profile.py fits the
tables with the shipped profiles' derive code, printing the per-op error on held-out and left-out runs.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from hardware.calibration.profiler_join import count_lines, join
from hardware.calibration.profiler_kernels import read_profiler
from hardware.calibration.user_profile import ProfiledRun, derive_profile
from hardware.model.profile import PROFILE_DIR, HardwareProfile, load_profile
from msbench.cell import Cell
from msbench.commands.cell_args import cell_from_args
from msbench.commands.config_cell import config_cell
from msbench.errors import UserError
from hardware.model.graph import extract_graph
from hardware.model.llm.extraction import llm_graphs
from hardware.model.llm.predict import cell_parts
from hardware.model.llm.step_ops import rank_step_ops
from hardware.model.lowering import lower
from hardware.model.opgraph import Op
from hardware.model.plan import resolve

NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
MARK = "msbench calibrate ascend"          # in the header of every profile this command writes


def calibrate_command(args: argparse.Namespace) -> int:
    if args.config is not None and (args.workloads or args.preset):
        given = f"workload {' '.join(args.workloads)!r}" if args.workloads else f"--preset {args.preset[-1]!r}"
        raise UserError(f"calibrate ascend: {given} with --config {args.config!r}; allowed: --config alone (the config "
                        "names the network; --set and --override go over it)")
    if args.config is None and len(args.workloads) != 1:
        raise UserError(f"calibrate ascend: workload {' '.join(args.workloads) or '(none)'!r}; allowed: exactly one "
                        "workload, the profiled cell's (msbench list workloads), or --config FILE")
    if not args.profiler:
        raise UserError("calibrate ascend: --profiler is missing; allowed: one or more profiler output folders")
    if not args.name or not NAME.fullmatch(args.name):
        raise UserError(f"calibrate ascend: --name {args.name!r}; allowed: lower-case letters, digits, '.', '_', '-'")
    chip = load_profile(args.chip)
    if chip.profile.kind != "npu":
        raise UserError(f"calibrate ascend: --chip {args.chip!r} is a {chip.profile.kind} profile; allowed: an NPU profile")
    out = (Path(args.out) if args.out else PROFILE_DIR) / f"{args.name}.toml"
    for path in {out, PROFILE_DIR / f"{args.name}.toml"}:       # a shipped name would also shadow an --out file
        if path.exists() and MARK not in path.read_text():
            raise UserError(f"calibrate ascend: --name {args.name!r}: {path} exists and was not written by {MARK}; "
                            "allowed: a new name")
    folders = [Path(spec.partition("::")[0]) for spec in args.profiler]
    unknown = [d for d in args.hold_out if Path(d) not in folders]
    if unknown:
        raise UserError(f"calibrate ascend: --hold-out {unknown[0]!r}; allowed: one of the --profiler folders")
    runs = label_runs([profiled_run(spec, args, chip) for spec in args.profiler])
    held = [run.label for folder, run in zip(folders, runs) if folder in {Path(d) for d in args.hold_out}]
    for run in runs:
        print(f"run {run.network} bs{run.batch}: {run.source.path} ({run.source.layout}), {len(run.source.kernels)} "
              f"AI Core kernels over {run.steps} step(s)"
              + (f"; left out (not AI Core): {', '.join(f'{n} {c}' for c, n in sorted(run.source.skipped.items()))}"
                 if run.source.skipped else ""))
        print(f"  cell: {run.cell}")
        if run.join is not None:
            print("\n".join(count_lines(run.join, f"{run.network} bs{run.batch}")))
    try:
        derived = derive_profile(runs, args.chip, args.name, held)
    except ValueError as exc:
        raise UserError(f"calibrate ascend: {exc}") from None
    print("\n".join(derived.lines))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(derived.text)
    print(f"wrote {out}" + ("" if not args.out else
                            f" (use it with MSBENCH_PROFILES={out.parent} msbench predict ... --hardware {args.name})"))
    return 0


def profiled_run(spec: str, args: argparse.Namespace, chip: HardwareProfile) -> ProfiledRun:
    """One `--profiler DIR[::KNOB=V,...]`: its kernels, its cell and the join to the cell's lowered graph."""
    folder, _, knobs = spec.partition("::")
    cell = profiled_cell(args, [k for k in knobs.split(",") if k])
    source = read_profiler(Path(folder))
    steps = len(source.steps) or args.steps
    lowered = step_ops(cell, chip)
    knob_text = ", ".join(f"{k}={v}" for k, v in sorted(cell.settings.non_default().items()))
    what = f"{cell.workload} ({cell.preset}{', ' + str(cell.overrides) if cell.overrides else ''}) {knob_text}"
    return ProfiledRun(cell.workload, cell.settings.batch_size, what, source, steps,
                       join(source.kernels, steps, lowered))


def step_ops(cell: Cell, chip: HardwareProfile) -> list[Op]:
    """The lowered ops of the cell's step on one card: its compiled training step, or an LLM's blocks and ends
    composed for a card of a layout without pipeline stages (hardware/model/llm/step_ops.py)."""
    plan = resolve(cell, chip)
    if not plan.llm:
        return list(lower(extract_graph(cell.workload, cell.preset, cell.overrides, cell.settings), cell.settings,
                          chip).ops)
    if cell.settings.pipeline_stages != 1:
        raise UserError(f"calibrate ascend: {cell.workload} with pipeline_stages={cell.settings.pipeline_stages}; "
                        "allowed: pipeline_stages=1 for an LLM (a pipelined card holds part of the embedding and "
                        "head, which the composition does not split kernel by kernel; profile a layout of "
                        "tensor and data parallelism)")
    return rank_step_ops(llm_graphs(cell_parts(plan)), plan.spec.layers, cell.settings, chip)


def profiled_cell(args: argparse.Namespace, run_knobs: list[str]) -> Cell:
    """The cell of one profiled run: the workload's recipe or the user's config, --set, then the run's own knobs."""
    target, sets = f"model:{args.chip}", [*args.set, *run_knobs]
    if args.config is not None:
        cell, _ = config_cell(argparse.Namespace(workload=None, preset=None, start=None, config=args.config, set=sets,
                                                 override=args.override, scenario="train"), target)
    else:
        cell = cell_from_args(argparse.Namespace(
            workload=args.workloads[0], preset=args.preset[-1] if args.preset else "full", set=sets,
            override=args.override, allow_plugin=[], start="recipe"), target)
    return cell


def label_runs(runs: list[ProfiledRun]) -> list[ProfiledRun]:
    """Runs of one (workload, batch) told apart as WORKLOAD-run2, -run3, ... (derive keys runs by label)."""
    seen: dict[tuple[str, int], int] = {}
    out = []
    for run in runs:
        n = seen[run.label] = seen.get(run.label, 0) + 1
        out.append(run if n == 1 else ProfiledRun(f"{run.network}-run{n}", run.batch, run.cell, run.source,
                                                  run.steps, run.join))
    return out
