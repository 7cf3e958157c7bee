"""`python -m hardware.calibration.an2022_totals`: the AI-Core time of one whole training step in each An et al.
run (the per-op source of the 910A tables), per sample and by kernel class.

The 910A profile's kernel tables are fitted to these kernels. For ResNet-50 at batch 32 they add up to 28.9 ms
of AI-Core time per step, and the device model, fitted to them, predicts the same step at 27.8-28.6 ms (the two
published batch-32 cases in docs/generated/validation-ascend910a.md), while the model zoo and the r1.5 profiler
case study publish whole steps of 18.1-18.4 ms, host and gaps included. So that 48-55% is in the component data
the tables come from (its software stack ran slower kernels than the published runs'), not a host- or
device-side mechanism the model lacks, and no mechanism fitted to these kernels can remove it. The runs are not
one stack either: BERT-base costs 1.59 ms of AI-Core time per sample at batch 128 (final_test) and 2.98 at
batch 256 (memorybound_app), which is why `derive` checks each network's dtypes against the HBM peak. It reads only the checked-in per-op table (no end-to-end figure), so it
prints the same on every machine.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Sequence

from hardware.calibration.table import Row, load_rows


def totals(rows: Sequence[Row]) -> dict[tuple[str, int], dict[str, float]]:
    """(network, batch) -> {"kernels": launched kernels per step, "ms": AI-Core ms per step, <class>: ms}."""
    out: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        run = out[(row.network, row.batch)]
        ms = row.duration_us * row.count / 1000.0
        run["kernels"] += row.count
        run["ms"] += ms
        run[row.kernel_class] += ms
    return {k: dict(v) for k, v in sorted(out.items())}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=3, help="the largest kernel classes to list per run")
    args = parser.parse_args(argv)
    print("| run | kernels per step | AI-Core ms per step | ms per sample | largest classes (ms) |")
    print("|---|---|---|---|---|")
    for (network, batch), run in totals(load_rows()).items():
        classes = sorted(((k, v) for k, v in run.items() if k not in ("kernels", "ms")), key=lambda kv: -kv[1])
        largest = ", ".join(f"{k} {v:.1f}" for k, v in classes[:args.classes])
        print(f"| {network} bs{batch} | {run['kernels']:.0f} | {run['ms']:.2f} | {run['ms'] / batch:.3f} | {largest} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
