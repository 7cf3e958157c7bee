"""`msbench predict WORKLOAD --hardware PROFILE [--preset P] [--set K=V] [--override F=V] [--json] [--trace FILE]`,
or `msbench predict --config FILE.yaml [--set K=V] [--override F=V] ...`: a user's own training config.

A question about an NPU is about the published network: on an NPU profile the preset defaults to
`full`; on the `cpu` profile (which is checked against real tiny-preset runs) to `tiny`.

One JSON object, keys sorted and floats rounded by `Prediction.to_dict`, so the bytes are the same
across runs, processes, thread counts and machines for the same inputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from hardware.model.outcome import predict_cell
from hardware.model.predict import Prediction
from hardware.model.profile import load_profile
from msbench.cell import Cell
from msbench.commands.cell_args import cell_from_args
from msbench.commands.config_cell import config_cell
from msbench.errors import UserError
from msbench.outputs import check_file
from workloads.recipes import recipe_for
from hardware.model.trace import UNTRACEABLE, trace_title, write_trace
from hardware.model.inputs import plan_graph
from hardware.model.plan import resolve


def cell_prediction(cell: Cell) -> tuple[Prediction, str]:
    """The prediction of `cell` (target `model:<profile>`) and its canonical JSON; a refusal is one line."""
    profile = cell.target.partition(":")[2]
    result = predict_cell(cell, profile)
    body = {"workload": cell.workload, "preset": cell.preset, "overrides": dict(sorted(cell.overrides.items())),
            "hardware": profile, "settings": cell.settings.non_default(), "cell_id": cell.id,
            **result.prediction.to_dict()}
    return result.prediction, json.dumps(body, sort_keys=True, separators=(",", ":"))


def graph_parameters(cell: Cell, profile: str) -> int:
    """Trainable parameters of a network the importer cannot count from its config (a mindcv model): those of
    the op graph the prediction just read (from the cache)."""

    return plan_graph(resolve(cell, profile), compile_missing=False).param_count


def predict_command(args: argparse.Namespace) -> int:
    load_profile(args.hardware)                        # an unknown profile is a one-line error first
    if args.trace is not None:
        check_file("--trace", args.trace)               # before the prediction: '' or a directory is refused
    imported = None
    if args.config is not None:
        cell, imported = config_cell(args, f"model:{args.hardware}")
    elif args.workload is None:
        raise UserError("a WORKLOAD or --config FILE is required (msbench list workloads)")
    else:
        cell = cell_from_args(args, f"model:{args.hardware}")
    prediction, text = cell_prediction(cell)           # the capability table: never a knob that changes nothing
    if imported is not None and imported.parameters is None:
        imported = dataclasses.replace(imported, parameters=graph_parameters(cell, args.hardware))
    if args.trace is not None:
        if prediction.parts is None:
            raise UserError(f"--trace={args.trace} is not allowed for {cell.workload}: {UNTRACEABLE}")
        write_trace(args.trace, prediction, trace_title(cell))
    recipe = None if imported else recipe_for(cell.workload, cell.preset, args.start or "recipe")
    if args.json:
        extra = {"config": imported.to_dict()} if imported else {}
        print(json.dumps({**json.loads(text), "recipe": recipe.source if recipe else None, **extra}, sort_keys=True,
                         separators=(",", ":")))
        return 0
    data = json.loads(text)
    if imported:
        print("\n".join(imported.summary_lines()))
    else:
        print(f"recipe: {recipe.source} ({recipe.config}), --set over it" if recipe else
              "recipe: none (MindSpore's API defaults, --set over them)")
    print(f"{data['workload']} ({data['preset']}) on {data['hardware']}: "
          f"{data['step_time_s'] * 1e3:.3f} ms/step, {data['throughput']:.1f} samples/s "
          f"({data['throughput_per_device']:.1f}/device), peak {data['peak_memory_bytes'] / 2**30:.2f} "
          f"of {data['memory_capacity_bytes'] / 2**30:.2f} GiB{' (OOM)' if data['oom'] else ''}, "
          f"{data['bound']}-bound, MFU {data['mfu']:.1%}")
    if "tokens_per_s_per_device" in data["detail"]:          # an LLM cell (hardware/model/llm)
        print(f"  {data['detail']['tokens_per_s_per_device']:.1f} tokens/s per device, memory per device: "
              + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in data["memory"].items() if v))
    for name, seconds in data["breakdown"].items():
        if seconds:
            print(f"  {name:<10} {seconds * 1e3:10.3f} ms")
    return 0
