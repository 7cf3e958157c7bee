"""`python -m hardware.calibration.docs18`: the model's kernels against the one public per-op table of an fp32 step.

The zh-CN migration guide's ResNet-50 sample (MindSpore 1.8, one Ascend 910, batch 32, Adam) shows the AI-Core
time of every op type of its O0 step and the five costliest of its O0-sink and O3-sink steps
(data/docs18_resnet50_ops.csv, transcribed from the screenshots). This prints, per op type, the profiled count
and time beside what the device model lowers and prices for the same step on the 910A, so the gap between the An et al. efficiency tables the model uses and this
later run is a figure, not an impression. It reads no end-to-end figure and writes nothing.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from hardware.model.outcome import predict_cell
from msbench.cell import Cell
from msbench.settings import make_settings

TABLE = Path(__file__).parent / "data" / "docs18_resnet50_ops.csv"
PROFILE = "ascend910a"
# The sample's runs as cells: the network and data as it trained (CIFAR-10's 32x32 images, 10 classes, a C++
# reader: mindrecord), the knobs its script sets.
RUNS = {"o0": {"amp_level": "O0", "loss_scale": "none"}, "o0-sink": {"amp_level": "O0", "loss_scale": "none"},
        "o3-sink": {"amp_level": "O3", "loss_scale": "static"}}
# Its profiles list no fused kernel (Conv2D and BNTrainingReduce, BNTrainingUpdate and ReLUV2 apart), so its kernels
# are lowered without buffer fusion: jit O0's kernel set (only kernel times are compared, not launch costs).
COMMON = {"mode": "graph", "jit_level": "O0", "sink": True, "optimizer": "adam", "lr_schedule": "constant",
          "batch_size": 32, "devices": 1, "workers": 8, "data_format": "mindrecord"}
OVERRIDES = {"num_classes": 10, "stored_width": 32, "stored_height": 32}


def profiled(run: str) -> dict[str, tuple[int, float]]:
    """op type -> (kernels, ms) of one run of the table."""
    lines = (line for line in TABLE.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
    return {r["op_type"]: (int(r["count"]), float(r["total_ms"])) for r in csv.DictReader(lines) if r["run"] == run}


def modelled(run: str) -> dict[str, tuple[int, float]]:
    """op type -> (kernels, ms) of the step lowered as the sample ran it (no fused kernels)."""
    cell = Cell(workload="resnet50", preset="full", overrides=OVERRIDES,
                settings=make_settings({**COMMON, **RUNS[run]}), target=f"model:{PROFILE}", label=f"docs18-{run}")
    prediction = predict_cell(cell, PROFILE).prediction
    assert prediction.parts is not None
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for kernel in prediction.parts.kernels:
        op_type = "+".join(op.type for op in kernel.ops)
        out[op_type][0] += 1
        out[op_type][1] += kernel.time_s * 1e3
    return {k: (int(n), ms) for k, (n, ms) in out.items()}


def lines(run: str) -> list[str]:
    measured, model = profiled(run), modelled(run)
    rows = [f"{run}: op type | profiled kernels, ms | model kernels, ms | model / profiled time"]
    for op_type, (n, ms) in sorted(measured.items(), key=lambda kv: -kv[1][1]):
        m_n, m_ms = model.get(op_type, (0, 0.0))
        rows.append(f"  {op_type:30s} {n:4d} {ms:8.3f} | {m_n:4d} {m_ms:8.3f} | {m_ms / ms:5.2f}")
    shared = [t for t in measured if t in model]
    rows.append(f"  over the {len(shared)} types both hold: profiled {sum(measured[t][1] for t in shared):.2f} ms, "
                f"model {sum(model[t][1] for t in shared):.2f} ms"
                + (f"; all profiled types {sum(ms for _, ms in measured.values()):.2f} ms, all model kernels "
                   f"{sum(ms for _, ms in model.values()):.2f} ms" if run == "o0" else ""))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", metavar="RUN", help=f"runs of the table (default: all of {', '.join(RUNS)})")
    args = parser.parse_args(argv)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown:
        parser.error(f"run {unknown[0]!r}: the table has {', '.join(RUNS)}")
    for run in args.runs or RUNS:
        print("\n".join(lines(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
