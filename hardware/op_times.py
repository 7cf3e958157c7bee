"""Per-op time of one step, one shape for both sides: measured (MindSpore's Profiler on a real run,
hardware/mindspore/profiling.py) and predicted (the device model's kernels), so that msbench.report.perop
can set them side by side op type by op type.

The dict (a record's `metrics.op_profile`):
  source         where the numbers come from
  steps          steps the numbers are averaged over (1 for a prediction)
  total_s        seconds of op time per step (sum over `by_type`)
  by_type        (keys sorted by name once stored) {op type: {"s": seconds per step, "share": of total_s, "calls": launches per step}}; a
                 prediction adds "slot_s": the kernels' time on the step's path with their dispatch
  top_kernels    the `TOP_KERNELS` longest op instances: {"name", "type", "s", "share"}
A measured profile also has `dir` (the Profiler's output folder, beside the run's records), and one from
Ascend `by_core` ({core type: seconds per step}, op_statistic's Core Type: AI_CORE, AI_VECTOR_CORE, AI_CPU).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

TOP_KERNELS = 10


def op_profile(by_type: Mapping[str, tuple[float, float]], instances: Iterable[tuple[str, str, float]],
               steps: int, source: str, slots: Mapping[str, float] | None = None) -> dict[str, Any]:
    """`by_type`: op type -> (seconds per step, launches per step); `instances`: (name, type, seconds per
    step); `slots` (predictions): op type -> seconds on the step's path including dispatch."""
    total = sum(s for s, _ in by_type.values())
    share = (lambda s: s / total) if total > 0 else (lambda s: 0.0)
    top = sorted(instances, key=lambda i: (-i[2], i[0]))[:TOP_KERNELS]
    return {
        "source": source, "steps": steps, "total_s": total,
        "by_type": {t: {"s": s, "share": share(s), "calls": calls, **({"slot_s": slots[t]} if slots else {})}
                    for t, (s, calls) in sorted(by_type.items(), key=lambda kv: (-kv[1][0], kv[0]))},
        "top_kernels": [{"name": name, "type": kind, "s": s, "share": share(s)} for name, kind, s in top],
    }


def kernel_type(op_types: Sequence[str]) -> str:
    """A launched kernel's type: its op's, or Ascend's spelling of a fused group (`FusionOp_A_B`)."""
    return op_types[0] if len(op_types) == 1 else "FusionOp_" + "_".join(op_types)


def predicted_op_profile(kernels: Sequence[Any], slots: Sequence[Any]) -> dict[str, Any]:
    """The device model's kernels (hardware.model.compute.Kernel) with their KernelSlots as an op profile
    of one step: `s` is each kernel's device time (roofline plus its fixed floor), as the Profiler's op
    time is a kernel's own execution; `slot_s` adds its dispatch where the step waits for it."""
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    instances = []
    for k, slot in zip(kernels, slots, strict=True):
        kind = kernel_type([op.type for op in k.ops])
        by_type[kind][0] += k.time_s
        by_type[kind][1] += 1
        by_type[kind][2] += slot.slot_s
        instances.append((k.ops[0].scope, kind, k.time_s))
    return op_profile({t: (s, n) for t, (s, n, _) in by_type.items()}, instances, 1, "model",
                      slots={t: v[2] for t, v in by_type.items()})
