"""Peak device memory of a training step, against the profile's usable capacity.

Model states follow ZeRO's accounting (Rajbhandari et al. 2019) under MindSpore's AMP, which keeps
fp32 Parameters and casts inside the graph: weights + gradients (parameter-sized) + optimizer
states (momentum/LARS: 1 buffer; Adam/AdamW/LAMB: 2). Activations are the forward outputs kept for
backward, from the compiled graph (so recompute and AMP dtypes are already applied). Gradient
accumulation adds a parameter-sized buffer (MindSpore GradAccumulationCell). The runtime adds
workspace, the data-sink queue, and allocator fragmentation on top.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class MemoryEstimate:
    params: int
    grads: int
    optimizer_states: int
    accumulation: int
    activations: int
    workspace: int
    data_queue: int
    fragmentation: int
    capacity: int

    @property
    def peak(self) -> int:
        return (self.params + self.grads + self.optimizer_states + self.accumulation + self.activations
                + self.workspace + self.data_queue + self.fragmentation)

    @property
    def oom(self) -> bool:
        return self.peak > self.capacity

    def to_dict(self) -> dict[str, int]:
        return {"params": self.params, "grads": self.grads, "optimizer_states": self.optimizer_states,
                "accumulation": self.accumulation, "activations": self.activations,
                "workspace": self.workspace, "data_queue": self.data_queue,
                "fragmentation": self.fragmentation}


def largest_transient(graph: OpGraph) -> int:
    """The biggest set of outputs one op allocates at once: scratch beyond the kept activations."""
    return max((sum(t.nbytes for t in op.outputs) for op in graph.ops), default=0)


def persistent_state_bytes(graph: OpGraph, settings: Settings) -> int:
    """Optimizer states plus accumulation buffers (and BN statistics, loss scale...): every weight the
    compiled graph holds beyond the trainable parameters when the graph reports it (`state_bytes`),
    else the optimizer's parameter-sized buffers."""
    if "state_bytes" in graph.meta:
        return max(int(graph.meta["state_bytes"]) - graph.param_bytes, 0)
    accumulation = graph.param_bytes if settings.grad_accum > 1 else 0
    return OPTIMIZER_STATES[settings.optimizer] * graph.param_bytes + accumulation


def estimate_memory(graph: OpGraph, settings: Settings, profile: HardwareProfile,
                    bytes_per_sample: float = 0.0) -> MemoryEstimate:
    mem = profile.memory
    params = graph.param_bytes
    grads = graph.param_bytes
    accumulation = graph.param_bytes if settings.grad_accum > 1 else 0
    states = max(persistent_state_bytes(graph, settings) - accumulation, 0)
    workspace = largest_transient(graph) + int(mem.workspace_mib * 2**20)
    queue = 0
    if settings.sink:
        queue = int(min(SINK_QUEUE_BATCHES * bytes_per_sample * graph.batch_size, SINK_QUEUE_MAX_BYTES))
    planned = params + grads + states + accumulation + graph.activation_bytes + workspace + queue
    return MemoryEstimate(params=params, grads=grads, optimizer_states=states, accumulation=accumulation,
                          activations=graph.activation_bytes, workspace=workspace, data_queue=queue,
                          fragmentation=int(planned * mem.fragmentation),
                          capacity=int(mem.usable_gib * 2**30))
