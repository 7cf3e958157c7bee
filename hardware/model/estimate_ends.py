"""Each `estimate` constant a prediction read, at both ends of its range: the cell predicted again there.

Made when the cell is predicted and stored in its record (`metrics.extra["estimate_ends"]`), so a report
tells a verdict that survives every plausible value from one that hangs on a guess by reading records
alone. An end changes one constant; lowering reads none of them (chip kind, core count, cast folding, jit
level), so the step is lowered once and its kernels are costed again only where an end changes a
device-side section of the profile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from hardware.model.compute import MEMORY_TABLE_CLASSES, Kernel, group_ops, kernel_memo, kernels, memo_kernel
from hardware.model.lowering import lower
from hardware.model.opclass import CUBE_CLASSES, FLASH_CLASSES, VECTOR_CLASSES
from hardware.model.opgraph import Op
from hardware.model.predict import KernelSums, Prediction, canonical, predict
from hardware.model.profile import HardwareProfile, with_estimate

# What a claim reads of a record (msbench/report/claims.py), kept for each end.
END_METRICS = ("step_time_s", "throughput", "throughput_per_device", "peak_memory_bytes", "memory_capacity_bytes",
               "oom", "bound", "mfu")
# What compute.kernels() reads of a profile: an end that leaves these equal leaves every kernel's time as is.
DEVICE_SECTIONS = ("cube", "vector", "memory", "kernel_classes", "precision")
# The memory section's sizes, which the memory estimate reads and costing does not.
MEMORY_SIZES = {"gib": 0.0, "usable_gib": 0.0, "fragmentation": 0.0, "workspace_mib": 0.0}
CLASS_TABLES = frozenset(CUBE_CLASSES + VECTOR_CLASSES + FLASH_CLASSES)   # one efficiency table per kernel class
UNALIGNED = "unaligned_"       # kernel_classes.unaligned_<class>: the time factor of that class's unaligned kernels
UNREAD_BY_LLM = "the LLM composition's ends are not predicted again (its three block graphs per end cost too much)"


@dataclass(frozen=True)
class ShippedStep:
    """The lowered step's kernels on the shipped profile, costed once per cell: every end starts from them."""

    ops: Sequence[Op]
    groups: list[list[Op]]
    kernels: list[Kernel]

    @classmethod
    def of(cls, ops: Sequence[Op], profile: HardwareProfile) -> "ShippedStep":
        return cls(ops, group_ops(ops), kernels(ops, profile))


def end_readers(key: str) -> frozenset[str] | None:
    """The kernel classes whose kernels an end of estimate `key` can change, or None: possibly every kernel.
    A class's efficiency table (`kernel_classes.<class>`) and its unaligned factor price only the kernels of
    that class, and the `memory` table only the traffic of the Cube classes' kernels."""
    section, _, name = key.partition(".")
    if section != "kernel_classes":
        return None
    if name in CLASS_TABLES:
        return frozenset({name})
    if name == "memory":
        return frozenset(MEMORY_TABLE_CLASSES)
    if name.startswith(UNALIGNED):
        return frozenset({name[len(UNALIGNED):]})
    return None


def costing_view(profile: HardwareProfile) -> tuple:
    """The profile as compute.kernels() reads it: two profiles with equal views cost every kernel alike."""
    return tuple(replace(profile.memory, **MEMORY_SIZES) if s == "memory" else getattr(profile, s)
                 for s in DEVICE_SECTIONS)


def ends_kernels(step: ShippedStep, profile: HardwareProfile, varied: HardwareProfile, key: str,
                 costed: dict[tuple, list[Kernel]]) -> list[Kernel]:
    """The step's kernels on `varied` (`profile` with estimate `key` at one end): only the kernels of the
    classes the end can change (`end_readers`) are costed again; any other device-side end costs every
    kernel again, once per distinct costing view of the profile."""
    readers = end_readers(key)
    if readers is not None:
        memo = kernel_memo(varied)        # an end's profile is the same for every cell of the chip: its kernels recur
        if not any(k.kernel_class in readers for k in step.kernels):
            return step.kernels           # the step has none of the classes: the same list, summed once (estimate_ends)
        return [memo_kernel(g, varied, memo) if k.kernel_class in readers else k for g, k in zip(step.groups, step.kernels)]
    view = costing_view(varied)
    if view == costing_view(profile):
        return step.kernels
    if view not in costed:
        costed[view] = kernels(step.ops, varied)
    return costed[view]


def end_metrics(prediction: Prediction) -> dict[str, Any]:
    data = prediction.to_dict()
    return {"status": "oom" if prediction.oom else "ok", **{k: data[k] for k in END_METRICS}}


def estimate_ends(result: Any, settings: Any, llm: bool) -> dict[str, Any]:
    """{constant: {"low", "high", "reason", "at": {value: the record's claim metrics there}}} for every
    estimate the prediction read (`result`: hardware.model.outcome.CellPrediction)."""
    read = set(result.prediction.detail.get("estimates") or ())
    if not read:
        return {}
    if llm:
        return {"unread": UNREAD_BY_LLM}
    profile: HardwareProfile = result.profile
    step = ShippedStep.of(lower(result.graph, settings, profile).ops, profile)
    costed: dict[tuple, list[Kernel]] = {}
    summed: dict[int, tuple[list[Kernel], KernelSums]] = {}    # by list, each kept alive: most ends share one

    def again(varied: HardwareProfile, key: str) -> Prediction:
        ks = ends_kernels(step, profile, varied, key, costed)
        if id(ks) not in summed:
            summed[id(ks)] = (ks, KernelSums.of(ks))
        return predict(result.graph, settings, varied, result.host, ks, summed[id(ks)][1])

    out: dict[str, Any] = {}
    for estimate in (e for e in profile.estimates if e.key in read):
        at = {f"{value:g}": end_metrics(again(with_estimate(profile, estimate.key, value), estimate.key))
              for value in dict.fromkeys((estimate.low, estimate.high))}
        out[estimate.key] = {"low": estimate.low, "high": estimate.high, "reason": estimate.reason, "at": at}
    return canonical(out)
