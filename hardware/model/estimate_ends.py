"""Each `estimate` constant a prediction read, at both ends of its range: the cell predicted again there.

Made when the cell is predicted and stored in its record (`metrics.extra["estimate_ends"]`), so a report
tells a verdict that survives every plausible value from one that hangs on a guess by reading records
alone. An end changes one constant; lowering reads none of them (chip kind, core count, cast folding, jit
level), so the step is lowered once and its kernels are costed again only where an end changes a
device-side section of the profile.
"""

from __future__ import annotations

from typing import Any

from hardware.model.compute import Kernel, kernels
from hardware.model.lowering import lower
from hardware.model.predict import Prediction, canonical, predict
from hardware.model.profile import HardwareProfile, with_estimate

# What a claim reads of a record (msbench/report/claims.py), kept for each end.
END_METRICS = ("step_time_s", "throughput", "throughput_per_device", "peak_memory_bytes", "memory_capacity_bytes",
               "oom", "bound", "mfu")
# What compute.kernels() reads of a profile: an end that leaves these equal leaves every kernel's time as is.
DEVICE_SECTIONS = ("cube", "vector", "memory", "kernel_classes", "precision")
UNREAD_BY_LLM = "the LLM composition's ends are not predicted again (its three block graphs per end cost too much)"


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
    ops = lower(result.graph, settings, profile).ops
    costed: dict[tuple, list[Kernel]] = {}

    def again(varied: HardwareProfile) -> Prediction:
        key = tuple(getattr(varied, s) for s in DEVICE_SECTIONS)
        if key not in costed:
            costed[key] = kernels(ops, varied)
        return predict(result.graph, settings, varied, result.host, costed[key])

    out: dict[str, Any] = {}
    for estimate in (e for e in profile.estimates if e.key in read):
        at = {f"{value:g}": end_metrics(again(with_estimate(profile, estimate.key, value)))
              for value in dict.fromkeys((estimate.low, estimate.high))}
        out[estimate.key] = {"low": estimate.low, "high": estimate.high, "reason": estimate.reason, "at": at}
    return canonical(out)
