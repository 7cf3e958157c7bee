"""flash_attention=true on the device model: the extracted block's attention core becomes Ascend's fused kernels.

The block is extracted with the plain core (softmax(QK^T/√d + mask)V, workloads/transformer/layers.py
AttentionCore): the CPU backend has no FlashAttentionScore. What MindSpore runs on Ascend with
`ops.flash_attention_score` is one FlashAttentionScore per layer forward and one FlashAttentionScoreGrad
backward, whose score tiles never leave the chip. This pass makes that replacement in the op list, before
the Ascend lowering, so the kernels around it get the same layout and launch treatment as any other.

Which ops are the core is read from tensor shapes, not scopes: the CPU backend's expansions rename scopes
(the scale Mul is `Expand/_Muls`, the mask Add carries the norm's scope). The score shape (b, a, s, s) is
the output of the core's first BatchMatMul (scope `AttentionCore`); every op that reads or writes a tensor
of that shape is the core: QK^T, scale, mask, softmax, dropout, PV and, backward, their gradients (dP,
the softmax gradient, dQ, dK, dV). Grouped-query attention's widening of K and V to every query head
(BroadcastTo to (b, kv, a/kv, s, d) and its gradient's ReduceSum) goes too: the fused kernel reads the kv
heads as they are. A head dimension equal to the sequence length would make score and head tensors alike:
refused.

Per phase: forward → FlashAttentionScore (Q, K, V and the uint8 mask in; O and softmax_max, softmax_sum,
each (b, a, s, 8) fp32, out: mindspore.ops.flash_attention_score); backward → FlashAttentionScoreGrad
(Q, K, V, dO, O, the two statistics and the mask in; dQ, dK, dV out); recompute → FlashAttentionScore
when recompute=full re-runs the whole block, nothing under selective (the flash block has no
AttentionCore cell to mark, so MindSpore recomputes nothing: the fused kernel keeps no score tensor).

FLOPs: forward 4·b·a·s_q·s_kv·d, the two GEMMs QK^T and PV at 2 FLOPs per MAC over the score blocks the
kernel computes; backward 2.5x forward, the five GEMMs of FlashAttention-2's backward (QK^T recomputed, dV,
dP, dQ, dK: Dao 2023, §4.1, which counts backward as 2.5x forward). The decoder is causal and calls the
kernel as MindFormers' LLMs do: the lower-triangle mask with pre_tokens >= seq and next_tokens = 0, which at
sparse_mode 0 is the kernel's causal case, where only the blocks on or below the diagonal are computed (CANN
ops-transformer, "Introduction to Sparse Mode", sparseMode=0; mindformers' Llama, Qwen, GLM attention set
next_tokens=0). Of an s x s score in square blocks of CAUSAL_BLOCK, n = ceil(s / CAUSAL_BLOCK) blocks a side,
n(n+1)/2 of n² are computed (`causal_fraction`), forward and backward alike. The public timings the flash
tables are fitted on ran unmasked (every block), so a computed block costs what it costs there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from hardware.model.opgraph import Op, TensorSpec
from msbench.errors import ConfigError

FORWARD_KERNEL = "FlashAttentionScore"
BACKWARD_KERNEL = "FlashAttentionScoreGrad"
BACKWARD_FLOPS_RATIO = 2.5          # Dao 2023 (FlashAttention-2) §4.1: five GEMMs backward against two forward
STAT_LANES = 8                      # softmax_max / softmax_sum are (b, a, s, 8) fp32 (ops.flash_attention_score)
# estimate, range 64-512: the side of the score blocks the causal kernel computes or skips whole. CANN does not
# document FlashAttentionScore's tiling; 128 is the Cube-friendly query block of FlashAttention-2's kernels.
# At the validation cases' seq 4096 the computed share is 0.508 (64) to 0.563 (512): 0.516 here, so the
# block's attention time moves by at most 9% over the range, the step by well under 1%.
CAUSAL_BLOCK = 128
BATCH_MATMULS = frozenset({"BatchMatMul", "BatchMatMulExt"})


def forward_flops(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int) -> int:
    """FlashAttentionScore's FLOPs: QK^T and PV, 2·s_q·s_kv·d each per head and sample."""
    return 4 * batch * heads * seq_q * seq_kv * head_dim


def backward_flops(forward: int) -> int:
    return round(BACKWARD_FLOPS_RATIO * forward)


def causal_fraction(seq: int, block: int = CAUSAL_BLOCK) -> float:
    """The share of an s x s causal score's blocks on or below the diagonal: (n + 1) / 2n, n = ceil(s / block)."""
    n = -(-seq // block)
    return (n + 1) / (2 * n)


@dataclass(frozen=True)
class AttentionShape:
    """The core of one block: `heads` query heads (the shard's), `kv_heads` key/value heads."""

    batch: int
    heads: int
    kv_heads: int
    seq: int
    head_dim: int
    dtype: str

    @property
    def score(self) -> tuple[int, ...]:
        return (self.batch, self.heads, self.seq, self.seq)

    @property
    def widened(self) -> tuple[int, ...] | None:
        """Grouped-query attention's K/V broadcast to every query head, (b, kv, a/kv, s, d)."""
        if self.kv_heads == self.heads:
            return None
        return (self.batch, self.kv_heads, self.heads // self.kv_heads, self.seq, self.head_dim)

    @property
    def forward_flops(self) -> int:
        """The causal kernel's: the computed blocks' share of the full score's FLOPs."""
        full = forward_flops(self.batch, self.heads, self.seq, self.seq, self.head_dim)
        return round(causal_fraction(self.seq) * full)


def attention_shape(ops: tuple[Op, ...]) -> AttentionShape:
    """The block's attention core, from its first BatchMatMul of scope AttentionCore writing (b, a, s, s)."""
    qk = next((op for op in ops if op.type in BATCH_MATMULS and "AttentionCore" in op.scope and op.outputs
               and len(op.outputs[0].shape) == 4 and op.outputs[0].shape[-1] == op.outputs[0].shape[-2]), None)
    if qk is None:
        raise ValueError("no materialised attention core in the block (a BatchMatMul of scope AttentionCore "
                         "writing (batch, heads, seq, seq)): nothing for flash attention to replace")
    b, a, s, _ = qk.outputs[0].shape
    query = qk.inputs[0]
    d = query.shape[-1]
    if d == s:
        raise ConfigError("seq_len", s, f"a length other than the head dimension {d} with flash_attention=true",
                          rule="the device model tells the score tensors (seq x seq) from the heads (seq x head_dim) "
                               "by shape")
    kv = a
    for op in ops:
        out = op.outputs[0].shape if op.type == "BroadcastTo" and op.outputs else ()
        if len(out) == 5 and out[0] == b and out[3:] == (s, d) and out[1] * out[2] == a and out[2] > 1:
            kv = out[1]
            break
    return AttentionShape(batch=b, heads=a, kv_heads=kv, seq=s, head_dim=d, dtype=query.dtype)


def in_core(op: Op, shape: AttentionShape) -> bool:
    core = {shape.score} | ({shape.widened} if shape.widened else set())
    return any(t.shape in core for t in (*op.inputs, *op.outputs))


def fused_kernel(kernel: str, phase: str, shape: AttentionShape, like: Op) -> Op:
    """One FlashAttentionScore (or its gradient) of the block's core, at the place of the core's first op."""
    b, a, kv, s, d = shape.batch, shape.heads, shape.kv_heads, shape.seq, shape.head_dim
    q, kvs = TensorSpec(shape.dtype, (b, a, s, d)), TensorSpec(shape.dtype, (b, kv, s, d))
    mask, stat = TensorSpec("UInt8", (s, s)), TensorSpec("Float32", (b, a, s, STAT_LANES))
    flops = shape.forward_flops
    if kernel == FORWARD_KERNEL:
        inputs, outputs = (q, kvs, kvs, mask), (q, stat, stat)
    else:
        inputs, outputs, flops = (q, kvs, kvs, q, q, stat, stat, mask), (q, kvs, kvs), backward_flops(flops)
    return Op(type=kernel, scope=like.scope, inputs=inputs, outputs=outputs, flops=flops,
              bytes=sum(t.nbytes for t in (*inputs, *outputs)), unit="cube", phase=phase)


@lru_cache(maxsize=64)
def fused_attention(ops: tuple[Op, ...], recompute: str) -> tuple[Op, ...]:
    """`ops` with the attention core replaced by the fused kernels (cached: the same tuple is lowered once)."""
    shape = attention_shape(ops)
    out: list[Op] = []
    placed: set[str] = set()
    for op in ops:
        if not in_core(op, shape):
            out.append(op)
            continue
        if op.phase in placed:
            continue
        placed.add(op.phase)
        if op.phase == "recompute" and recompute != "full":
            continue
        kernel = BACKWARD_KERNEL if op.phase == "backward" else FORWARD_KERNEL
        out.append(fused_kernel(kernel, op.phase, shape, op))
    return tuple(out)


def core_ops(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """The ops `fused_attention` removes (for tests and reports)."""
    shape = attention_shape(ops)
    return tuple(op for op in ops if in_core(op, shape))
