"""Device memory of one LLM training step under tensor, pipeline and data parallelism.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", §4, table 2), per layer with 16-bit activations and 1-byte dropout masks:
  attention 11sbh + 5as²b, MLP 19sbh, two norms 4sbh: sbh(34 + 5as/h) per layer;
  tensor parallel t: sbh(10 + 24/t + 5as/(ht)) (the 10sbh outside the TP regions stays whole);
  sequence parallel: sbh(34/t + 5as/(ht));
  selective recompute drops the 5as/h term; full recompute keeps the layer input, 2sbh (/t with SP).
The same terms are written here for grouped-query attention (K and V at the kv width), a gated FFN
(SwiGLU keeps its input, both branch outputs and their product: 2sbh + 6sbf) and no dropout; with
kv = h, f = 4h, a GeLU FFN and dropout they reduce to the paper's 34 and 5 exactly (a test checks).
Flash attention keeps no score tensors: Ascend's FlashAttentionScore saves softmax_max and softmax_sum,
each (b, a, s, 8) fp32 (MindSpore ops.flash_attention_score), instead of the 5as²b.
Under 1F1B the first stage holds min(p, m) micro-batches in flight, the last one (Narayanan et al.
2021, §2.2); the peak is the larger of the two stages. The embedding output (its dropout mask) is on
the first stage; the output layer's norm input, head input and fp32 logits, 4sbh/t(1 + v/h) with
SP (Korthikanti §4.3), on the last.

Model states (Rajbhandari et al. 2019, ZeRO, K = 12 for Adam) under MindSpore's AMP, which stores
fp32 Parameters: weights 4Ψ, gradients 4Ψ, Adam moments 8Ψ bytes, Ψ the parameters of the stage's shard on this card.
MindSpore's parallel optimizer (`enable_parallel_optimizer`, docs features/parallel/optimizer_parallel)
"saves the parameters as minimal slices and updates them in the optimizer" across the data-parallel
cards: weights and states divide by dp, gradients are reduce-scattered to 1/dp (ZeRO-2 semantics),
and each layer's weights are all-gathered for its forward: one layer's gathered weights and full
gradient are live at a time, counted as transient.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.memory_estimate import MemoryEstimate
from hardware.model.profile import HardwareProfile

ACT_BYTES = 2            # 16-bit activations (fp16/bf16 compute)
PARAM_BYTES = 4          # fp32 Parameters under MindSpore AMP
GRAD_BYTES = 4
ADAM_STATE_BYTES = 8     # two fp32 moments
FA_STAT_BYTES = 2 * 8 * 4    # softmax_max + softmax_sum, 8 fp32 per (b, a, s)


@dataclass(frozen=True)
class StageParams:
    """Trainable parameters one tensor-parallel rank holds, by position (from the per-shard extraction),
    and the whole model's count (for MFU)."""

    layer: int            # one decoder block's shard
    first: int            # the embedding's shard (on pipeline stage 1)
    last: int             # final norm + output head shard (on the last stage)
    total: int            # the unsharded model


def layer_activation_bytes(shape: DecoderShape, par: Parallel) -> float:
    """Bytes one layer keeps for backward for one micro-batch on one card (Korthikanti table 2 terms)."""
    s, b, h, f, kv, a = shape.seq, par.micro_batch, shape.hidden, shape.ffn, shape.kv_dim, shape.heads
    t = par.tp
    sbh = s * b * h
    mask = 1 if shape.dropout else 0                      # bytes per element of a dropout mask
    if par.recompute == "full":
        return ACT_BYTES * sbh / (t if par.sequence_parallel else 1)
    # Outside the tensor-parallel regions: two norm inputs, the QKV and MLP inputs, two dropout masks.
    outside = (2 * ACT_BYTES + 2 * ACT_BYTES) * sbh + 2 * mask * sbh
    # Inside: Q, K, V, the attention output (projection input); the FFN's saved tensors.
    attention = ACT_BYTES * (2 * sbh + 2 * s * b * kv)
    mlp = ACT_BYTES * (3 * s * b * f) if shape.gated_ffn else ACT_BYTES * 2 * s * b * f
    inside = attention + mlp
    scores = 0.0
    if par.flash_attention:
        scores = FA_STAT_BYTES * b * a * s
    elif par.recompute != "selective":
        # softmax output (2as²b); with dropout also its mask and output (as²b + 2as²b)
        scores = (ACT_BYTES + (1 + ACT_BYTES) * mask) * a * s * s * b
    split_outside = outside / t if par.sequence_parallel else outside
    return split_outside + (inside + scores) / t


def first_stage_extra_bytes(shape: DecoderShape, par: Parallel) -> float:
    """The embedding output's dropout mask per micro-batch (Korthikanti §4.3: sbhp/t over p in flight)."""
    mask = 1 if shape.dropout else 0
    return mask * shape.seq * par.micro_batch * shape.hidden / (par.tp if par.sequence_parallel else 1)


def last_stage_extra_bytes(shape: DecoderShape, par: Parallel) -> float:
    """Final norm input, head input (2sbh each, /t with SP) and fp32 logits 4sbv/t (Korthikanti §4.3)."""
    sb = shape.seq * par.micro_batch
    norm_and_head = 2 * ACT_BYTES * sb * shape.hidden / (par.tp if par.sequence_parallel else 1)
    return norm_and_head + 4 * sb * shape.vocab / par.tp


def stage_memory(shape: DecoderShape, par: Parallel, params: StageParams, profile: HardwareProfile,
                 stage: str) -> MemoryEstimate:
    """Memory of the first or the last pipeline stage (`only` when pp = 1: both ends on one card)."""
    layers = shape.layers // par.pp
    in_flight = min(par.pp, par.micro_batches) if stage in ("first", "only") else 1
    psi = layers * params.layer
    activations = layers * in_flight * layer_activation_bytes(shape, par)
    if stage in ("first", "only"):
        psi += params.first
        activations += in_flight * first_stage_extra_bytes(shape, par)
    if stage in ("last", "only"):
        psi += params.last
        activations += last_stage_extra_bytes(shape, par)
    local = psi                                            # already one TP rank's shard
    shard = par.dp if par.optimizer_shard else 1
    transient = (ACT_BYTES + GRAD_BYTES) * params.layer if par.optimizer_shard and par.dp > 1 else 0
    mem = profile.memory
    workspace = int(mem.workspace_mib * 2**20)
    dynamic = activations + transient + workspace
    return MemoryEstimate(params=round(PARAM_BYTES * local / shard), grads=round(GRAD_BYTES * local / shard),
                          optimizer_states=round(ADAM_STATE_BYTES * local / shard), activations=round(activations),
                          transient=round(transient), workspace=workspace,
                          fragmentation=round(dynamic * mem.fragmentation), capacity=int(mem.usable_gib * 2**30),
                          stage=stage)


def llm_memory(shape: DecoderShape, par: Parallel, params: StageParams, profile: HardwareProfile) -> MemoryEstimate:
    """The fullest card's memory: the first stage (most micro-batches in flight) or the last (logits)."""
    if par.pp == 1:
        return stage_memory(shape, par, params, profile, "only")
    stages = [stage_memory(shape, par, params, profile, s) for s in ("first", "last")]
    return max(stages, key=lambda m: m.peak)
