"""The 910A's kernel level from later per-op tables than An et al.'s: one time factor per kernel class.

    python -m hardware.calibration.stack_level            # rewrite data/stack_level_910a.json
    python -m hardware.calibration.stack_level --check    # exit 1 if the committed file differs

Why: the 910A tables (derive.py) are fitted on An et al.'s per-op times, whose size dependence covers six
networks; but the same ResNet-50 batch-32 step's kernels ran at about 0.6 of An et al.'s times on the software
stacks of two later public per-op tables (op_tables.py: docs11, MindSpore 1.1-1.2, buffer-fused at AMP O2 as
the model zoo runs it; docs18, MindSpore 1.8, unfused at O0). An et al.'s own batches say the gap is not a
size effect that later batches would remove: their ResNet-50 AI-Core time per step is 21.2, 28.9 and 47.3 ms
at batch 16, 32 and 64, a line with a 12.5 ms intercept and 0.54 ms per sample, and docs11's whole step is
17.0 ms, that slope's 32 samples with no intercept (an2022_totals).

How: each class's factor is the model's time for docs11's kernels of that class on the An-fitted tables over
the time docs11 profiled for them (a profiled op type's time split over classes as the model's kernels of
that type split it), iterated with the scaled tables until every factor reproduces its class (a table capped
at efficiency 1 may not). Classes with under MIN_MS of profiled time keep factor 1 (docs11's data movement is
mostly TransData, whose kernel count differs: a different kernel set, not a different speed); the Cube
MatMul classes have no later 910A table and keep An et al.'s level. docs18's factors, computed the same way,
are the estimate's far end: derive labels each scaled table `estimate` from An et al.'s level (low) to
docs18's (high). It predicts one cell on the device model (a cached ResNet-50 compile) and reads no
end-to-end figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Mapping, Sequence

from hardware.calibration import derive, op_tables
from hardware.calibration.kernel_fit import sig
from hardware.model.lowering import kernel_type
from hardware.model.opclass import VECTOR_CLASSES
from hardware.model.outcome import predict_cell
from hardware.model.profile import HardwareProfile, with_estimate
from msbench.cell import Cell
from msbench.settings import make_settings

LEVEL_RUN = "docs11-o2-fused"     # the level: a fused, sunk AMP O2 step, as the recipes run
FAR_RUN = "docs18-o0"             # the estimate's far end: the newest stack, unfused fp32
MIN_MS = 1.0                      # a class with less profiled time keeps An et al.'s level
ROUNDS = 12


def scaled(profile: HardwareProfile, factors: Mapping[str, float]) -> HardwareProfile:
    """`profile` with each class table's efficiencies times its factor (capped at 1)."""
    for kind, factor in sorted(factors.items()):
        profile = with_estimate(profile, f"kernel_classes.{kind}", factor)
    return profile


def class_times(run: str, profile: HardwareProfile) -> dict[str, tuple[float, float]]:
    """kernel class -> (model ms, profiled ms) over the op types both the run's table and the model hold."""
    spec = op_tables.RUNS[run]
    cell = Cell(workload="resnet50", preset="full", overrides=dict(spec.overrides),
                settings=make_settings(dict(spec.knobs)), target=f"model:{op_tables.PROFILE}", label=run)
    prediction = predict_cell(cell, profile).prediction
    assert prediction.parts is not None
    by_type: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for kernel in prediction.parts.kernels:
        by_type[kernel_type(kernel.ops)][kernel.kernel_class] += kernel.time_s * 1e3
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for op_type, (_, ms) in op_tables.profiled(run).items():
        model = by_type.get(op_type)
        if not model:
            continue
        total = sum(model.values())
        for kind, t in model.items():
            out[kind][0] += t
            out[kind][1] += ms * t / total
    return {k: (m, p) for k, (m, p) in sorted(out.items())}


def with_memory(factors: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """The factors with `memory`'s: the traffic table of Cube kernels is fitted on the Vector kernels
    (derive.py), so it takes their level, the profiled-time-weighted mean of the Vector classes' factors."""
    vector = [k for k in factors if k in VECTOR_CLASSES]
    total = sum(weights[k] for k in vector)
    return {**factors, "memory": sum(factors[k] * weights[k] for k in vector) / total} if total else dict(factors)


def level_factors(run: str, base: HardwareProfile) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """The class factors (and `memory`'s) that bring the run's kernels on `base` to their profiled times, and
    the (model ms on `base`, profiled ms) they were taken from."""
    first = class_times(run, base)
    weights = {k: ms for k, (_, ms) in first.items() if ms >= MIN_MS}
    factors = dict.fromkeys(weights, 1.0)
    for _ in range(ROUNDS):
        now = class_times(run, scaled(base, with_memory(factors, weights)))
        factors = {k: f * now[k][0] / now[k][1] for k, f in factors.items()}
    return {k: sig(f) for k, f in with_memory(factors, weights).items()}, first


def computed() -> dict[str, object]:
    base = derive.an_fitted()
    level, seen = level_factors(LEVEL_RUN, base)
    far, far_seen = level_factors(FAR_RUN, base)
    return {
        "about": "python -m hardware.calibration.stack_level: the 910A's time factor per kernel class, An et al.'s "
                 "tables over a later per-op table of the same ResNet-50 step (derive scales the tables by it)",
        "level_run": LEVEL_RUN, "far_run": FAR_RUN,
        "level": level,
        "far": {k: far.get(k, 1.0) for k in level},
        "model_ms_on_an_tables": {k: round(v[0], 3) for k, v in seen.items() if k in level},
        "profiled_ms": {k: round(v[1], 3) for k, v in seen.items() if k in level},
        "far_model_ms_on_an_tables": {k: round(v[0], 3) for k, v in far_seen.items() if k in level},
        "far_profiled_ms": {k: round(v[1], 3) for k, v in far_seen.items() if k in level},
    }


def text(data: Mapping[str, object]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    new = text(computed())
    print(new, end="")
    if args.check:
        current = derive.LEVEL_DATA.read_text() if derive.LEVEL_DATA.exists() else ""
        if current != new:
            print(f"stale: {derive.LEVEL_DATA.name} differs (run python -m hardware.calibration.stack_level)", file=sys.stderr)
            return 1
        return 0
    derive.LEVEL_DATA.write_text(new)
    print(f"wrote {derive.LEVEL_DATA.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
