"""Peak device memory of a training step, against the profile's usable capacity.

Model states follow ZeRO's accounting (Rajbhandari et al. 2019) under MindSpore's AMP, which keeps
fp32 Parameters and casts inside the graph: weights + gradients (parameter-sized) + optimizer
states. The persistent part (weights, optimizer moments, accumulation buffers, BN statistics) is
what the compiled graph holds as weights (`meta["state_bytes"]`), else the optimizer's
parameter-sized buffers (momentum/LARS: 1; Adam/AdamW/LAMB: 2).

Activations are the forward outputs kept for backward, from the compiled graph's data flow (so
recompute and AMP dtypes are already applied). Backward frees them as it produces gradients, so
the dynamic peak is max(activations, gradients), not their sum. Where the device compiler fuses
Cast into its neighbours (Ascend's buffer fusion: no activation-sized standalone Cast kernels in
An et al.'s per-op profiles), an up-cast copy kept for backward is stored at its source width.
Ascend's kernels keep a bitmask where the CPU backend's keep a tensor (lowering.py): ReLUV2 writes one
bit per element that ReluGradV2 reads instead of the ReLU output, and DropoutGenMask one bit per element
that DropoutDoMask reads instead of the CPU's input-sized mask. A ReLU output that another backward
kernel reads too (the next convolution's weight gradient) stays. BatchNorm keeps what both backends'
gradients read (BNTrainingUpdateGrad/BatchNormGrad: the input and the batch statistics), so no change.
The runtime adds workspace, the data-sink queue, and allocator fragmentation on top.

`memory_optimize_level`: O0 (MindSpore's default) allocates from the dynamic pool as tensors are
created and frees them at their last use (the liveness above), paying the profile's fragmentation;
O1 turns on SOMAS, which plans every tensor's offset ahead of run time from the graph's lifetimes, so
the pool's fragmentation becomes the plan's packing loss (`tips.somas_packing_loss`, an estimate:
hardware/model/tip_estimates.py).
`max_device_memory` caps the pool: the OOM threshold is min(cap, usable memory), as `set_memory`'s
max_size is ("the actual memory used is the minimum of the device's available memory and max_size").
"""

from __future__ import annotations

import math

from hardware.model.memory_estimate import MemoryEstimate
from hardware.model.opgraph import OpGraph
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

# Parameter-sized fp32 buffers each optimizer keeps (MindSpore nn.Momentum/LARS: moments;
# nn.Adam/AdamWeightDecay/Lamb: moment1, moment2).
OPTIMIZER_STATES = {"momentum": 1, "lars": 1, "adam": 2, "adamw": 2, "lamb": 2}

# mindspore.data_sink / dataset sink: the device queue holds up to 100 batches and at most 2 GB
# (reference ascend-hardware.md, B).
SINK_QUEUE_BATCHES = 100
SINK_QUEUE_MAX_BYTES = 2 * 10**9

def capacity_bytes(settings: Settings, profile: HardwareProfile) -> int:
    """The OOM threshold: the chip's usable memory, or the `max_device_memory` cap below it."""
    usable = profile.memory.usable_gib
    cap = usable if settings.max_device_memory is None else min(settings.max_device_memory, usable)
    return int(cap * 2**30)


def fragmentation_share(settings: Settings, profile: HardwareProfile) -> float:
    """Allocator overhead on the dynamic memory: the pool's (O0) or SOMAS' packing loss (O1)."""
    share = profile.memory.fragmentation
    return share * profile.tips.somas_packing_loss if settings.memory_optimize_level == "O1" else share


def persistent_state_bytes(graph: OpGraph, settings: Settings) -> int:
    """Every weight the compiled graph holds beyond the trainable parameters when the graph reports it
    (`state_bytes`), else the optimizer's parameter-sized buffers plus the accumulation buffer."""
    if "state_bytes" in graph.meta:
        return max(int(graph.meta["state_bytes"]) - graph.param_bytes, 0)
    accumulation = graph.param_bytes if settings.grad_accum > 1 else 0
    return OPTIMIZER_STATES[settings.optimizer] * graph.param_bytes + accumulation


def fused_upcast_bytes(graph: OpGraph) -> int:
    """Bytes a cast-fusing compiler does not store: each forward up-cast (fp16 -> fp32 before an fp32
    BatchNorm or loss) keeps its fp16 source instead of the fp32 copy."""
    saved = 0
    for op in graph.ops:
        if op.type == "Cast" and op.phase == "forward" and op.inputs and op.outputs:
            saved += max(op.outputs[0].nbytes - op.inputs[0].nbytes, 0)
    return saved


# (producer type, output index) of a CPU kernel -> the backward kernel that reads it, where Ascend keeps a
# one-bit-per-element mask for that reader instead (ReLUV2's mask, DropoutGenMask's mask).
BITMASKED = {("ReLU", 0): "ReluGrad", ("Dropout", 1): "DropoutGrad"}


def bitmask_delta(graph: OpGraph) -> int:
    """Bytes an NPU keeps more (negative: fewer) than the CPU backend for the BITMASKED tensors, from the
    extraction's `kept_activations` (summed over the step; scaled to the peak, which with gradient
    accumulation is one micro-batch's share)."""
    entries = graph.meta.get("kept_activations") or []
    total = sum(int(e[4]) for e in entries)
    if total <= 0:
        return 0
    delta = 0
    for producer, index, readers, _count, nbytes, elements in entries:
        grad = BITMASKED.get((producer, index))
        if grad is None or grad not in readers.split("+"):
            continue
        delta += math.ceil(int(elements) / 8) - (int(nbytes) if readers == grad else 0)
    return round(delta * min(graph.activation_bytes / total, 1.0))


def kept_activations(graph: OpGraph, profile: HardwareProfile) -> int:
    """The forward outputs the device keeps for backward (`graph` as extracted: the CPU backend's kernels)."""
    kept = graph.activation_bytes
    if profile.precision.fuses_casts:
        kept -= fused_upcast_bytes(graph)
    if profile.profile.kind == "npu":
        kept += bitmask_delta(graph)
    return max(kept, 0)


def estimate_memory(graph: OpGraph, settings: Settings, profile: HardwareProfile,
                    bytes_per_sample: float = 0.0) -> MemoryEstimate:
    mem = profile.memory
    accumulation = graph.param_bytes if settings.grad_accum > 1 else 0
    states = max(persistent_state_bytes(graph, settings) - accumulation, 0)
    activations = kept_activations(graph, profile)
    grads = max(graph.param_bytes - activations, 0)
    workspace = int(mem.workspace_mib * 2**20)
    queue = 0
    if settings.sink:
        queue = int(min(SINK_QUEUE_BATCHES * bytes_per_sample * graph.batch_size, SINK_QUEUE_MAX_BYTES))
    dynamic = activations + grads + workspace + queue
    return MemoryEstimate(params=graph.param_bytes, optimizer_states=states, accumulation=accumulation,
                          activations=activations, grads=grads, workspace=workspace, data_queue=queue,
                          fragmentation=int(dynamic * fragmentation_share(settings, profile)),
                          capacity=capacity_bytes(settings, profile))
