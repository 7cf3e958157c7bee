"""`msbench calibrate WHAT`: one verb, one measuring module per calibration file."""

from __future__ import annotations

import argparse

COMMANDS = {"host": "hardware.calibration.host_cost", "pipeline-modes": "hardware.calibration.pipeline_modes",
            "ascend": "msbench.commands.calibrate_ascend"}


def calibrate_command(args: argparse.Namespace) -> int:
    import importlib

    return importlib.import_module(COMMANDS[args.what]).calibrate_command(args)
