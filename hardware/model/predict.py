"""The device model's one entry point: a pure function of (graph, settings, profile, host cost).

The host cost is an entry of the calibration file (hardware/model/host_cost.py), never a probe.

No I/O, no clocks, no randomness: the same inputs give the same Prediction, and `to_dict` rounds
every float to a fixed number of significant digits so its JSON is byte-identical everywhere.

Step time = device kernels with their dispatch (compute.py, host_time.py)
          + per-step round trip and batch copy (host_time.py)
          + the gradient all-reduce that backward does not hide (comm.py)
          + the data pipeline time that does not overlap the rest (host_time.py).
On an NPU profile the graph is first lowered to the kernels that chip launches (lowering.py).
The graph is the whole compiled step: every micro-batch of gradient accumulation, the recompute
forward and the optimizer are already ops in it, so nothing is multiplied here.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from hardware.model.comm import CommTime, gradient_allreduce
from hardware.model.compute import Kernel, cube_dtype, kernels, matrix_tflops
from hardware.model.estimates import estimates_used
from hardware.model.host_time import (Dispatch, HostCostLike, HostTime, KernelSlot, host_time, pipeline_workers)
from hardware.model.lowering import lower
from hardware.model.memory import estimate_memory
from hardware.model.opgraph import OpGraph
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

PHASES = ("forward", "recompute", "backward", "optimizer")
BOUNDS = ("compute", "memory", "host", "data", "comm")
SIGNIFICANT = 6


@dataclass(frozen=True)
class StepParts:
    """The quantities a prediction is assembled from, kept for its timeline (hardware/model/trace.py)."""

    kernels: tuple[Kernel, ...]
    dispatch: Dispatch
    host: HostTime
    comm: CommTime
    data_exposed_s: float
    pipeline_workers: int              # data-pipeline workers that get a host core

    @functools.cached_property
    def slots(self) -> tuple[KernelSlot, ...]:
        """Per kernel, in launch order; made when read (a timeline, an op profile), not for every prediction:
        a cell's estimate ends predict it ~30 times and read none."""
        return tuple(self.dispatch.slots(self.kernels))


@dataclass(frozen=True)
class Prediction:
    step_time_s: float
    throughput: float                  # samples/s over all devices
    throughput_per_device: float
    peak_memory_bytes: int
    memory_capacity_bytes: int
    oom: bool
    bound: str                         # compute|memory|host|data|comm
    breakdown: dict[str, float]        # seconds per step per component; they add up to step_time_s
    mfu: float
    memory: dict[str, int] = field(default_factory=dict)     # bytes per component of the peak
    detail: dict[str, Any] = field(default_factory=dict)     # counts and totals behind the figures
    parts: StepParts | None = field(default=None, compare=False, repr=False)   # not in to_dict

    def to_dict(self) -> dict[str, Any]:
        """Rounded, key-sorted-ready plain data (the JSON of `msbench predict`)."""
        return canonical({
            "step_time_s": self.step_time_s, "throughput": self.throughput,
            "throughput_per_device": self.throughput_per_device, "peak_memory_bytes": self.peak_memory_bytes,
            "memory_capacity_bytes": self.memory_capacity_bytes, "oom": self.oom, "bound": self.bound,
            "breakdown": self.breakdown, "mfu": self.mfu, "memory": self.memory, "detail": self.detail,
        })


def canonical(value: Any) -> Any:
    """Round floats to SIGNIFICANT digits (deterministic text whatever the last-bit noise)."""
    if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
        return value
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    raise TypeError(f"cannot canonicalise {type(value).__name__}")


def phase_seconds(ks: Sequence[Kernel]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k in ks:
        out[k.phase] += k.time_s
    return {p: out.get(p, 0.0) for p in PHASES}


@dataclass(frozen=True)
class KernelSums:
    """What a prediction sums over its step's kernels. They depend on the kernels alone, and a cell's estimate
    ends predict the same kernel list again and again (every host-side end): summed once per list, the ends'
    predictions of the nightly's cells took 7.6 s instead of 14; summed in the same order either way, so the
    figures are the same to the bit."""

    device_s: float
    phases: dict[str, float]
    compute_bound_s: float
    memory_bound_s: float
    model_flops: int
    flops: int
    bytes: int

    @classmethod
    def of(cls, ks: Sequence[Kernel]) -> "KernelSums":
        return cls(device_s=sum(k.time_s for k in ks), phases=phase_seconds(ks),
                   compute_bound_s=sum((k.time_s for k in ks if not k.memory_bound), 0.0),
                   memory_bound_s=sum((k.time_s for k in ks if k.memory_bound), 0.0),
                   model_flops=sum(op.flops for k in ks for op in k.ops if op.phase in ("forward", "backward")),
                   flops=sum(k.flops for k in ks), bytes=sum(k.bytes for k in ks))


def peak_tflops(ks: list[Kernel], profile: HardwareProfile) -> float:
    """The Cube peak at the dtype that carries most matrix FLOPs (the precision the step trains in)."""
    by_dtype: dict[str, int] = defaultdict(int)
    for k in ks:
        for op in k.ops:
            if op.unit == "cube":
                by_dtype[cube_dtype(op, profile)] += op.flops
    dtype = max(sorted(by_dtype), key=lambda d: by_dtype[d]) if by_dtype else "fp32"
    return matrix_tflops(dtype, profile)


def predict(graph: OpGraph, settings: Settings, profile: HardwareProfile, host: HostCostLike,
            device_kernels: Sequence[Kernel] | None = None, sums: KernelSums | None = None) -> Prediction:
    """`device_kernels`: `kernels(lower(graph, settings, profile).ops, profile)` when the caller has them
    already, and `sums` their KernelSums (a cell is predicted again at each estimate's range ends, and most
    ends leave the kernels as they are: estimate_ends.py); lowering and costing the kernels is most of a
    prediction's time."""
    ks = list(device_kernels) if device_kernels is not None else kernels(lower(graph, settings, profile).ops, profile)
    sums = sums or KernelSums.of(ks)
    samples = graph.batch_size * graph.grad_accum                 # per device per optimizer step
    epoch_steps = int(graph.meta.get("steps_per_epoch", 0))
    ht = host_time(ks, settings, profile, host, samples, epoch_steps, len(graph.ops), device_s=sums.device_s)
    phases = sums.phases
    comm = gradient_allreduce(graph.param_bytes, settings.devices, phases["backward"] + phases["recompute"], profile)

    serial = ht.kernel_path_s + ht.roundtrip_s + ht.transfer_s + comm.exposed_s + ht.recompile_s
    data_exposed = max(0.0, ht.data_s - serial) if ht.data_overlapped else ht.data_s
    step = serial + data_exposed
    breakdown = {**phases, "dispatch": ht.dispatch_s, "roundtrip": ht.roundtrip_s, "transfer": ht.transfer_s,
                 "comm": comm.exposed_s, "data": data_exposed, **({"recompile": ht.recompile_s} if ht.recompile_s else {})}

    compute_bound, memory_bound = sums.compute_bound_s, sums.memory_bound_s
    shares = {"compute": compute_bound, "memory": memory_bound,
              "host": ht.dispatch_s + ht.roundtrip_s + ht.transfer_s + ht.recompile_s, "data": data_exposed, "comm": comm.exposed_s}
    pipeline_limits = ht.data_overlapped and ht.data_s >= serial      # the device waits for batches
    bound = "data" if pipeline_limits else max(BOUNDS, key=lambda b: shares[b])

    model_flops = sums.model_flops
    mem = estimate_memory(graph, settings, profile, host.bytes_per_sample)
    per_device = samples / step if step > 0 else 0.0
    return Prediction(
        step_time_s=step, throughput=per_device * settings.devices, throughput_per_device=per_device,
        peak_memory_bytes=mem.peak, memory_capacity_bytes=mem.capacity, oom=mem.oom, bound=bound,
        breakdown=breakdown, mfu=model_flops / (step * peak_tflops(ks, profile) * 1e12) if step > 0 else 0.0,
        memory=mem.to_dict(),
        detail={"kernels": len(ks), "ops": len(graph.ops), "flops": sums.flops,
                "model_flops": model_flops, "bytes": sums.bytes, "device_s": ht.device_s,
                "compute_bound_s": compute_bound, "memory_bound_s": memory_bound, "data_total_s": ht.data_s,
                "comm_total_s": comm.total_s, "comm_buckets": comm.buckets, "samples_per_step": samples,
                "profile": profile.name, "profile_hash": profile.digest,
                "estimates": [e["key"] for e in estimates_used(ks, settings, profile, ht.data_s, ht.transfer_s)],
                "host_cost_hash": host.calibration_hash},
        parts=StepParts(kernels=tuple(ks), dispatch=Dispatch.of(settings, profile), host=ht, comm=comm,
                        data_exposed_s=data_exposed,
                        pipeline_workers=pipeline_workers(settings, profile)),
    )
