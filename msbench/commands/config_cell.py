"""The cell of a user's own training config (`--config FILE.yaml`: MindFormers, mindcv or mindyolo), with
`--set` and `--override` over it: what `msbench predict --config` predicts and `msbench calibrate ascend
--config` joins its profiler output to."""

from __future__ import annotations

import argparse

from msbench.cell import Cell, parse_overrides
from msbench.errors import UserError
from msbench.importers import ImportedConfig, import_config
from msbench.matrix import check_workload_settings
from msbench.settings import make_settings, parse_assignments


def config_cell(args: argparse.Namespace, target: str) -> tuple[Cell, ImportedConfig]:
    """The cell of `--config FILE` with `--set` and `--override` over it; WORKLOAD, --preset and --from are
    the config's to decide, so giving them too is refused."""
    for given, name in ((args.workload, "WORKLOAD"), (args.preset, "--preset"), (args.start, "--from")):
        if given is not None:
            raise UserError(f"{name}={given} is not allowed with --config={args.config}; allowed: --config alone "
                            "(the config names the network and its settings; --set and --override go over it)")
    imported = import_config(args.config)
    settings = make_settings({**imported.knobs, **parse_assignments(args.set)}, where=f"--set over {args.config}")
    cell = Cell(workload=imported.workload, preset=imported.preset,
                overrides={**imported.overrides, **parse_overrides(args.override)}, settings=settings, target=target,
                scenario=args.scenario)
    check_workload_settings(cell)
    return cell, imported
