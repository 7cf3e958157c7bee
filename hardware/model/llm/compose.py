"""One LLM training step from the costs of one decoder block and of the model's two ends.

Per micro-batch, each pipeline stage runs its L/p blocks forward, (recompute,) backward, and the
tensor-parallel collectives of each block: Megatron-LM's two all-reduces of b·s·h in the forward and
two in the backward (Shoeybi et al. 2019, §3), two more when full recompute re-runs the forward
(Korthikanti et al. 2022, §5); with sequence parallelism each becomes a reduce-scatter plus an
all-gather, the same bytes (Korthikanti §4.2.2). The vocabulary-parallel embedding adds one forward
all-reduce on the first stage, the output layer one backward all-reduce on the last. Adjacent stages
exchange b·s·h activations (/t with SP) forward and their gradients backward.

1F1B (Narayanan et al. 2021, §2.2): the slowest stage's micro-batch time t sets the pace, and the
step's pipeline part is (m + p − 1)·t, of which the bubble is (p − 1)·t, a fraction (p−1)/(m+p−1).
The data-parallel gradient all-reduce (or, with the parallel optimizer, the reduce-scatter of the
gradients and the all-gather of the updated weights) runs in fused buckets under the last
micro-batch's backward (and the all-gather under the first micro-batch's forward); what does not fit
is exposed. The optimizer then updates the card's 1/t (and 1/dp with optimizer_shard) of the weights.

MFU counts 6N + 12·L·h·s FLOPs per token (Chowdhery et al. 2022, PaLM, appendix B): model FLOPs
only, so recompute and the bubble lower it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware.model.llm import comm
from hardware.model.llm.memory import ACT_BYTES, GRAD_BYTES, StageParams, llm_memory
from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.memory_estimate import MemoryEstimate
from hardware.model.profile import HardwareProfile


@dataclass(frozen=True)
class PassCost:
    """Device seconds of one micro-batch through a part of the model (one block, or the ends) by phase;
    `optimizer_s` is its weights' update, once per step, unsharded."""

    forward_s: float
    backward_s: float
    recompute_s: float = 0.0
    optimizer_s: float = 0.0

    @property
    def micro_batch_s(self) -> float:
        return self.forward_s + self.recompute_s + self.backward_s


@dataclass(frozen=True)
class LlmStep:
    step_time_s: float
    breakdown: dict[str, float]       # seconds per step; they add up to step_time_s
    memory: MemoryEstimate
    tokens_per_step: int              # over all cards
    model_flops_per_token: float
    bubble_fraction: float
    detail: dict[str, float | int | str]

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_step / self.step_time_s / self.devices if self.step_time_s > 0 else 0.0

    @property
    def devices(self) -> int:
        return int(self.detail["devices"])

    def mfu(self, peak_tflops: float) -> float:
        return self.tokens_per_s_per_device * self.model_flops_per_token / (peak_tflops * 1e12)


def tp_seconds_per_block(shape: DecoderShape, par: Parallel, profile: HardwareProfile) -> float:
    volume = ACT_BYTES * par.micro_batch * shape.seq * shape.hidden
    collectives = 4 + (2 if par.recompute == "full" else 0)
    return collectives * comm.allreduce(volume, comm.tp_group(par), profile)


def model_flops_per_token(shape: DecoderShape, params: StageParams) -> float:
    return 6.0 * params.total + 12.0 * shape.layers * shape.hidden * shape.seq


def ends_share(first: float, last: float, stages: int) -> float:
    """What the fullest stage carries of the two ends: both on one stage, else the larger."""
    return first + last if stages == 1 else max(first, last)


def compose(shape: DecoderShape, par: Parallel, block: PassCost, first: PassCost, last: PassCost,
            params: StageParams, profile: HardwareProfile) -> LlmStep:
    """The step of `par` from per-micro-batch costs at per-shard shapes (a pure function of its inputs)."""
    par.check(shape)
    layers = shape.layers // par.pp
    tp_group = comm.tp_group(par)
    volume = ACT_BYTES * par.micro_batch * shape.seq * shape.hidden
    tp_block = tp_seconds_per_block(shape, par, profile)
    ends_tp = comm.allreduce(volume, tp_group, profile)     # embedding fwd / head input-gradient bwd
    send = comm.send_seconds(volume / (par.tp if par.sequence_parallel else 1), par, profile)

    def stage(ends: list[PassCost], edges: int) -> dict[str, float]:
        """Per micro-batch: compute, TP collectives, sends (one each way per stage boundary it has)."""
        return {"compute": layers * block.micro_batch_s + sum(e.micro_batch_s for e in ends),
                "tp_comm": layers * tp_block + ends_tp * len(ends), "pp_send": 2 * edges * send}

    if par.pp == 1:
        stages = [stage([first, last], 0)]
    else:
        middle = [stage([], 2)] if par.pp > 2 else []
        stages = [stage([first], 1), stage([last], 1), *middle]
    slowest = max(stages, key=lambda s: sum(s.values()))
    t = sum(slowest.values())
    m, p = par.micro_batches, par.pp
    bubble = (p - 1) * t

    # Data parallel: the fullest stage's gradients, under the last micro-batch's backward.
    stage_params = layers * params.layer + ends_share(params.first, params.last, p)
    grad_bytes = GRAD_BYTES * stage_params
    dp_group = comm.dp_group(par)
    backward_window = layers * (block.backward_s + block.recompute_s)
    if par.optimizer_shard:
        rs = comm.bucketed(grad_bytes, dp_group, backward_window, profile, factor=0.5)
        ag = comm.bucketed(grad_bytes, dp_group, layers * block.forward_s, profile, factor=0.5)
        dp_exposed, dp_total, buckets = rs.exposed_s + ag.exposed_s, rs.total_s + ag.total_s, rs.buckets
    else:
        ar = comm.bucketed(grad_bytes, dp_group, backward_window, profile)
        dp_exposed, dp_total, buckets = ar.exposed_s, ar.total_s, ar.buckets
    optimizer = (layers * block.optimizer_s + ends_share(first.optimizer_s, last.optimizer_s, p)) \
        / (par.dp if par.optimizer_shard else 1)

    breakdown = {"compute": m * slowest["compute"], "tp_comm": m * slowest["tp_comm"],
                 "pp_send": m * slowest["pp_send"], "pp_bubble": bubble, "dp_comm": dp_exposed,
                 "optimizer": optimizer}
    step = sum(breakdown.values())
    memory = llm_memory(shape, par, params, profile)
    return LlmStep(
        step_time_s=step, breakdown=breakdown, memory=memory,
        tokens_per_step=m * par.micro_batch * shape.seq * par.dp,
        model_flops_per_token=model_flops_per_token(shape, params),
        bubble_fraction=(p - 1) / (m + p - 1),
        detail={"devices": par.devices, "tensor_parallel": par.tp, "pipeline_stages": p, "data_parallel": par.dp,
                "micro_batches": m, "micro_batch": par.micro_batch, "layers_per_stage": layers,
                "micro_batch_stage_s": t, "tp_comm_per_block_s": tp_block, "stage_send_s": send,
                "dp_comm_total_s": dp_total, "dp_buckets": buckets, "dp_grad_bytes": round(grad_bytes),
                "fullest_stage": memory.stage})
