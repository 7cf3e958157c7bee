"""The cell a command line names: `WORKLOAD [--preset] [--set ...] [--override ...]` on a target, started from
the workload's published recipe where the command has `--from` (msbench predict, measure, calibrate ascend)."""

from __future__ import annotations

import argparse

from msbench.cell import Cell, parse_overrides
from msbench.matrix import check_workload_settings
from msbench.plugins import check_spec
from msbench.settings import make_settings, parse_assignments
from workloads.registry import check_workload


def cell_from_args(args: argparse.Namespace, target: str):
    """The Cell named by `WORKLOAD [--preset] [--set ...] [--override ...]` on `target`."""
    check_workload(args.workload, tuple(check_spec(p) for p in args.allow_plugin), "the command line")
    preset = args.preset
    if preset is None:                      # `msbench predict`: the profile decides (full on an NPU)
        # lazy: the CLI's startup loads only what every verb needs (msbench --help: 198 modules; at the top, 226)
        from hardware.model.profile import default_preset, load_profile

        preset = default_preset(load_profile(target.partition(":")[2]))
    start: dict[str, object] = {}
    if hasattr(args, "start"):                  # `msbench predict --from`: the published recipe, --set over it
        # lazy: the CLI's startup loads only what every verb needs (msbench --help: 198 modules; at the top, 226)
        from workloads.recipes import recipe_for

        recipe = recipe_for(args.workload, preset, args.start or "recipe")
        start = dict(recipe.settings) if recipe else {}
    settings = make_settings({**start, **parse_assignments(args.set)},
                             where=f"--set over the {args.workload} recipe (--from mindspore-defaults: over none)"
                             if start else "--set")
    cell = Cell(workload=args.workload, preset=preset, overrides=parse_overrides(args.override),
                settings=settings, target=target, scenario=getattr(args, "scenario", "train"))

    check_workload_settings(cell)   # refuse a bad preset, field or workload-dependent knob value now
    return cell
