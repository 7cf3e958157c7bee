"""Forward-only prediction (scenario = "inference"): one call of the exported forward network.

Pure like hardware/model/predict.py. The graph is the cell's extracted training step with only its
forward kernels of the network kept (no loss, backward, recompute or optimizer), lowered and costed
as a training step's. Latency = the kernel path with its dispatch + one host round trip + copying the
batch in; no data pipeline (the real target feeds a resident batch) and no gradient all-reduce.
Memory: the weights, plus the working set of the forward pass (nothing is kept for a backward), plus
the profile's workspace and fragmentation; no gradients, optimizer states or accumulation buffers.

Forward BatchNorm is costed as extracted from the training step (batch statistics); the exported
network normalises with its moving statistics, a little less work, so the forward is an upper
estimate there. The round trip is the profile's `launch.step_us`, priced for a training step: on the
`cpu` profile that constant is fitted on training loops (34.9 ms, with the pipeline's batch fetch and the
loss read-back), so there it overstates a forward call's overhead (measured here: p50 5.5 ms for a
whole ResNet-50 tiny call at batch 1, under load); a per-call constant fitted on inference runs is the
missing input. The working set is the largest single kernel's inputs plus outputs: an `estimate`
(a lower bound of the live activations; range up to the training step's kept activations).
"""

from __future__ import annotations

import dataclasses

from hardware.model.comm import gradient_allreduce
from hardware.model.compute import kernels
from hardware.model.estimates import estimates_used
from hardware.model.host_time import Dispatch, HostCostLike, HostTime, kernel_path_seconds
from hardware.model.lowering import lower
from hardware.model.memory_estimate import MemoryEstimate
from hardware.model.opgraph import OpGraph
from hardware.model.predict import Prediction, StepParts, peak_tflops
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

WORKING_SET_ESTIMATE = "inference.working_set"   # see the module docstring: a lower bound of live activations
LOSS_SCOPE = "/loss_fn-"       # the training step's loss cell (workloads/train_step.py LossNet.loss_fn)


def forward_graph(graph: OpGraph) -> OpGraph:
    """The network's forward kernels of a training-step graph, one micro-batch, nothing kept for backward."""
    ops = tuple(op for op in graph.ops if op.phase == "forward" and LOSS_SCOPE not in op.scope)
    return dataclasses.replace(graph, ops=ops, grad_accum=1, activation_bytes=0,
                               meta={k: v for k, v in graph.meta.items() if k != "state_bytes"})


def working_set_bytes(graph: OpGraph) -> int:
    """The largest inputs + outputs of one forward kernel: what must be live at once at least."""
    return max((sum(t.nbytes for t in (*op.inputs, *op.outputs)) for op in graph.ops), default=0)


def forward_memory(graph: OpGraph, profile: HardwareProfile) -> MemoryEstimate:
    mem = profile.memory
    activations = working_set_bytes(graph)
    workspace = int(mem.workspace_mib * 2**20)
    return MemoryEstimate(params=graph.param_bytes, optimizer_states=0, accumulation=0, activations=activations,
                          grads=0, workspace=workspace, data_queue=0,
                          fragmentation=int((activations + workspace) * mem.fragmentation),
                          capacity=int(mem.usable_gib * 2**30))


def predict_inference(graph: OpGraph, settings: Settings, profile: HardwareProfile, host: HostCostLike) -> Prediction:
    """One forward call of `graph` (a training-step graph; its forward part is taken here)."""
    forward = forward_graph(graph)
    ks = kernels(lower(forward, settings, profile).ops, profile)
    batch = forward.batch_size
    path = kernel_path_seconds(ks, settings, profile)
    roundtrip = profile.launch.step_us * 1e-6
    transfer = host.bytes_per_sample * batch / (profile.host.link_gbps * 1e9)
    device = sum(k.time_s for k in ks)
    ht = HostTime(kernel_path_s=path, device_s=device, roundtrip_s=roundtrip, transfer_s=transfer, data_s=0.0,
                  data_overlapped=True)
    latency = path + roundtrip + transfer
    breakdown = {"forward": device, "dispatch": ht.dispatch_s, "roundtrip": roundtrip, "transfer": transfer}
    compute_bound = sum((k.time_s for k in ks if not k.memory_bound), 0.0)
    memory_bound = device - compute_bound
    shares = {"compute": compute_bound, "memory": memory_bound, "host": ht.dispatch_s + roundtrip + transfer}
    flops = sum(k.flops for k in ks)
    mem = forward_memory(forward, profile)
    per_second = batch / latency if latency > 0 else 0.0
    return Prediction(
        step_time_s=latency, throughput=per_second, throughput_per_device=per_second,
        peak_memory_bytes=mem.peak, memory_capacity_bytes=mem.capacity, oom=mem.oom,
        bound=max(shares, key=lambda b: shares[b]), breakdown=breakdown,
        mfu=flops / (latency * peak_tflops(ks, profile) * 1e12) if latency > 0 else 0.0, memory=mem.to_dict(),
        detail={"scenario": "inference", "kernels": len(ks), "ops": len(forward.ops), "flops": flops,
                "model_flops": flops, "bytes": sum(k.bytes for k in ks), "device_s": device,
                "compute_bound_s": compute_bound, "memory_bound_s": memory_bound, "samples_per_step": batch,
                "profile": profile.name, "profile_hash": profile.digest, "host_cost_hash": host.calibration_hash,
                "estimates": sorted([e["key"] for e in estimates_used(ks, settings, profile, 0.0, transfer)]
                                    + [WORKING_SET_ESTIMATE])},
        parts=StepParts(kernels=tuple(ks), dispatch=Dispatch.of(settings, profile), host=ht,
                        comm=gradient_allreduce(0, 1, 0.0, profile), data_exposed_s=0.0, pipeline_workers=0),
    )
