"""`python -m hardware.calibration.op_tables`: the model's kernels beside the public per-op-type tables of the 910.

Two MindSpore docs pages show MindInsight's AI-Core op-type table of a ResNet-50 training step on an Ascend 910
(screenshots, transcribed into data/):

- docs11 (data/docs11_resnet50_fused_ops.csv; 2021, MindSpore 1.1-1.2): a buffer-fused, graph-sunk step with
  Momentum, AMP and, by its kernel times, batch 32: 17.0 ms of AI-Core time in twenty op types;
- docs18 (data/docs18_resnet50_ops.csv; 2022, MindSpore 1.8, the zh-CN migration guide's sample, CIFAR-10 at
  224x224, batch 32, Adam): the whole table of an unfused fp32 (O0) step, and the five costliest op types of
  the same script with sink at O0 and at O3.

For each run this prints, per op type, the profiled kernels and time beside the kernels the device model
lowers for the same cell on the 910A and what it prices them at: the gap between the An et al. efficiency
tables the model uses (fitted on another, slower run of the same network) and these later runs, as a figure.
It reads no end-to-end figure and writes nothing.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from hardware.model.lowering import kernel_type
from hardware.model.outcome import predict_cell
from msbench.cell import Cell
from msbench.settings import make_settings

DATA = Path(__file__).parent / "data"
PROFILE = "ascend910a"
ALIASES = {"TensorAdd": "Add"}          # MindSpore 1.2 renamed TensorAdd to Add


@dataclass(frozen=True)
class Run:
    """One profiled step of a table and the cell that is the same step for the device model."""

    table: Path
    overrides: Mapping[str, Any]
    knobs: Mapping[str, Any]


# docs18's run fused nothing (Conv2D apart from BNTrainingReduce, BNTrainingUpdate apart from ReLUV2), so it is
# lowered as jit O0's kernel set (only kernel times are compared, not launch costs); its data as it trained (CIFAR-10's
# 32x32 images, 10 classes, a C++ reader: mindrecord). docs11's is jit O2's fused set; batch 32 and AMP O2 with a
# static loss scale are read from its kernels (FusedMulApplyMomentum, 53 fused Conv2D, a 2 ms BN gradient).
DOCS18 = {"mode": "graph", "jit_level": "O0", "sink": True, "optimizer": "adam", "lr_schedule": "constant",
          "batch_size": 32, "devices": 1, "workers": 8, "data_format": "mindrecord"}
CIFAR = {"num_classes": 10, "stored_width": 32, "stored_height": 32}
RUNS = {
    "docs11-o2-fused": Run(DATA / "docs11_resnet50_fused_ops.csv", {}, {
        "mode": "graph", "jit_level": "O2", "sink": True, "amp_level": "O2", "loss_scale": "static",
        "optimizer": "momentum", "batch_size": 32, "devices": 1, "workers": 8, "data_format": "mindrecord"}),
    "docs18-o0": Run(DATA / "docs18_resnet50_ops.csv", CIFAR, {**DOCS18, "amp_level": "O0", "loss_scale": "none"}),
    "docs18-o0-sink": Run(DATA / "docs18_resnet50_ops.csv", CIFAR, {**DOCS18, "amp_level": "O0", "loss_scale": "none"}),
    "docs18-o3-sink": Run(DATA / "docs18_resnet50_ops.csv", CIFAR, {**DOCS18, "amp_level": "O3", "loss_scale": "static"}),
}


def canonical(op_type: str) -> str:
    return "_".join(ALIASES.get(part, part) for part in op_type.split("_"))


def profiled(name: str) -> dict[str, tuple[int | None, float]]:
    """op type -> (kernels or None where the page does not show them, ms) of one run."""
    run = name.split("-", 1)[1]
    lines = (line for line in RUNS[name].table.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
    return {canonical(r["op_type"]): (int(r["count"]) if r["count"] else None, float(r["total_ms"]))
            for r in csv.DictReader(lines) if r["run"] == run}


def modelled(name: str) -> dict[str, tuple[int, float]]:
    """op type (the profiler's name of each launched kernel) -> (kernels, ms) of the same step on the model."""
    run = RUNS[name]
    cell = Cell(workload="resnet50", preset="full", overrides=dict(run.overrides), settings=make_settings(dict(run.knobs)),
                target=f"model:{PROFILE}", label=name)
    prediction = predict_cell(cell, PROFILE).prediction
    assert prediction.parts is not None
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for kernel in prediction.parts.kernels:
        entry = out[kernel_type(kernel.ops)]
        entry[0] += 1
        entry[1] += kernel.time_s * 1e3
    return {k: (int(n), ms) for k, (n, ms) in out.items()}


def lines(name: str) -> list[str]:
    measured, model = profiled(name), modelled(name)
    rows = [f"{name}: op type | profiled kernels, ms | model kernels, ms | model / profiled time"]
    for op_type, (n, ms) in sorted(measured.items(), key=lambda kv: -kv[1][1]):
        m_n, m_ms = model.get(op_type, (0, 0.0))
        rows.append(f"  {op_type:46s} {'' if n is None else n:>4} {ms:8.3f} | {m_n:4d} {m_ms:8.3f} | {m_ms / ms:5.2f}")
    shared = [t for t in measured if t in model]
    rows.append(f"  the {len(shared)} types both hold: profiled {sum(measured[t][1] for t in shared):.2f} ms, model "
                f"{sum(model[t][1] for t in shared):.2f} ms; every profiled type {sum(ms for _, ms in measured.values()):.2f}"
                f" ms, every model kernel {sum(ms for _, ms in model.values()):.2f} ms")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", metavar="RUN", help=f"runs to print (default: all of {', '.join(RUNS)})")
    args = parser.parse_args(argv)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown:
        parser.error(f"run {unknown[0]!r}: the tables hold {', '.join(RUNS)}")
    for run in args.runs or RUNS:
        print("\n".join(lines(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
