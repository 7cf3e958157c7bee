"""`msbench calibrate ascend WORKLOAD|--config FILE --profiler DIR... --name NAME`: a profile of the user's chip
from its profiler output.

Each `--profiler DIR` is one profiled run of the cell named by WORKLOAD, --preset, --set and --override (over
the workload's published recipe, as `msbench predict` starts), or by the user's own mindcv or mindyolo config
(`--config`, as `msbench predict --config` reads it); `DIR::KNOB=V,KNOB=V` gives one run knobs of its
own (another batch size, say). An LLM is refused: its prediction composes compiled blocks, and a profile is
joined only to a whole compiled training step. Every run is joined to the lowered graph of its cell (the kernel-count match
per type is printed), its kernels become per-op table rows, and hardware/calibration/user_profile.py fits the
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
from workloads.transformer.config import is_llm_preset
from msbench.cell import Cell
from msbench.commands.cell_args import cell_from_args
from msbench.commands.config_cell import config_cell
from msbench.errors import UserError
from workloads.registry import get_workload
from hardware.model.lowering import lower

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
    from hardware.model.graph import extract_graph          # MindSpore's graph extraction: only when a run is read

    folder, _, knobs = spec.partition("::")
    cell = profiled_cell(args, [k for k in knobs.split(",") if k])
    source = read_profiler(Path(folder))
    steps = len(source.steps) or args.steps
    graph = extract_graph(cell.workload, cell.preset, cell.overrides, cell.settings)
    lowered = lower(graph, cell.settings, chip).ops
    knob_text = ", ".join(f"{k}={v}" for k, v in sorted(cell.settings.non_default().items()))
    what = f"{cell.workload} ({cell.preset}{', ' + str(cell.overrides) if cell.overrides else ''}) {knob_text}"
    return ProfiledRun(cell.workload, cell.settings.batch_size, what, source, steps,
                       join(source.kernels, steps, lowered))


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
    if is_llm_preset(get_workload(cell.workload).preset(cell.preset, cell.overrides)):
        raise UserError(f"calibrate ascend: {cell.workload} is an LLM, predicted by composing compiled blocks; "
                        "allowed: a network whose whole training step is compiled (ResNet-50, YOLO, BERT, a mindcv or "
                        "mindyolo config): joining profiler kernels to composed blocks is not built")
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
