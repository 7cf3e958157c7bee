"""The decoder-only LLM stack (Llama 2, GPT-3) built on the shared Transformer blocks of layers.py.

Pre-norm blocks `x + attention(norm(x))`, `x + ffn(norm(x))` with, per preset: RMSNorm or LayerNorm,
SwiGLU or GELU feed-forward, rotary or learned positions, grouped-query attention (`kv_heads` < `heads`),
and either the plain attention core (BatchMatMul, softmax) or Ascend's fused FlashAttentionScore.

Every projection is an `nn.Dense`, whose `matmul` primitive takes the parallel plan's shard strategies
(`DecoderBlock.shard_matmuls`), and `build_block` builds ONE block at per-shard shapes, so the device
model extracts a block of a tensor-parallel layout without building the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import mindspore as ms
from mindspore import nn, ops

from workloads.transformer.config import LLMPreset
from workloads.transformer.layers import AttentionCore, Embeddings, FeedForward, causal_bias, dense, layer_norm

if TYPE_CHECKING:  # pragma: no cover
    from workloads.parallel_plan import MatmulShard

NORM_EPS = 1e-5          # Llama 2 rms_norm_eps and GPT-2/3 layer_norm_epsilon
ROPE_THETA = 10000.0     # Su et al. 2021; Llama 2's rope_theta


class RMSNorm(nn.Cell):
    """x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019): no mean subtraction, no bias."""

    def __init__(self, d: int, eps: float = NORM_EPS) -> None:
        super().__init__()
        self.weight = ms.Parameter(ops.ones(d, ms.float32), name="weight")
        self.eps = eps

    def construct(self, x):
        return x * ops.rsqrt(ops.mean(ops.square(x), -1, keep_dims=True) + self.eps) * self.weight


def make_norm(kind: str, d: int) -> nn.Cell:
    return RMSNorm(d) if kind == "rmsnorm" else layer_norm(d, NORM_EPS)


def rotary_tables(seq_len: int, head_dim: int) -> tuple[ms.Tensor, ms.Tensor]:
    """cos and sin of position x frequency, (T, head_dim), in the half-split layout of the released Llama
    code: frequency i pairs dimension i with i + head_dim/2 (Su et al. 2021, eq. 34)."""
    inv = ROPE_THETA ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq_len, dtype=np.float64), inv)
    angles = np.concatenate([angles, angles], axis=-1)
    return ms.Tensor(np.cos(angles).astype(np.float32)), ms.Tensor(np.sin(angles).astype(np.float32))


def rotate(x, cos, sin):
    """x (B, H, T, d) rotated by position: x cos + rotate_half(x) sin, rotate_half(a, b) = (-b, a)."""
    half = x.shape[-1] // 2
    turned = ops.concat((-x[..., half:], x[..., :half]), -1)
    return x * cos + turned * sin


class GroupedQueryAttention(nn.Cell):
    """Q from `heads` heads, K and V from `kv_heads` (each shared by heads / kv_heads query heads: Ainslie et
    al. 2023; equal counts are plain multi-head attention), optional rotary positions, causal attention."""

    def __init__(self, d_model: int, heads: int, kv_heads: int, head_dim: int, rotary: bool, biased: bool,
                 flash: bool, dropout: float, std: float, out_std: float, qkv_biased: bool | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.rotary, self.flash = rotary, flash
        qkv_biased = biased if qkv_biased is None else qkv_biased     # Qwen, ChatGLM: Q/K/V biased, output not
        self.query = dense(d_model, heads * head_dim, std, qkv_biased)
        self.key = dense(d_model, kv_heads * head_dim, std, qkv_biased)
        self.value = dense(d_model, kv_heads * head_dim, std, qkv_biased)
        self.output = dense(heads * head_dim, d_model, out_std, biased)
        self.scale = 1.0 / math.sqrt(head_dim)
        if not flash:
            self.core = AttentionCore(head_dim, dropout)

    def split(self, x, heads: int):
        b, t, _ = x.shape
        return ops.transpose(ops.reshape(x, (b, t, heads, self.head_dim)), (0, 2, 1, 3))

    def widen(self, x):
        """(B, kv_heads, T, d) -> (B, heads, T, d): each kv head serves its group of query heads."""
        if self.kv_heads == self.heads:
            return x
        b, _, t, d = x.shape
        group = self.heads // self.kv_heads
        x = ops.broadcast_to(ops.expand_dims(x, 2), (b, self.kv_heads, group, t, d))
        return ops.reshape(x, (b, self.heads, t, d))

    def construct(self, x, bias, cos, sin):
        b, t, _ = x.shape
        q, k = self.split(self.query(x), self.heads), self.split(self.key(x), self.kv_heads)
        v = self.split(self.value(x), self.kv_heads)
        if self.rotary:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if self.flash:
            # FlashAttentionScore takes the kv heads as they are (GQA), a uint8 mask (1 = hidden) and
            # fp16/bf16 only: AMP O1 hands it fp32 projections, cast here (the settings refuse O0). The
            # lower-triangle mask with next_tokens=0 (pre_tokens at its default, every earlier token) is the
            # kernel's causal case at sparse_mode 0, as MindFormers' decoders call it: the blocks above the
            # diagonal are skipped, not computed and masked.
            mask = ops.cast(bias < 0, ms.uint8)[0, 0]
            dtype = q.dtype
            if dtype == ms.float32:
                q, k, v = ops.cast(q, ms.float16), ops.cast(k, ms.float16), ops.cast(v, ms.float16)
            context = ops.flash_attention_score(q, k, v, self.heads, attn_mask=mask, scalar_value=self.scale,
                                                next_tokens=0, input_layout="BNSD")
            context = ops.cast(context, dtype)
        else:
            context = self.core(q, self.widen(k), self.widen(v), bias)
        return self.output(ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (b, t, self.heads * self.head_dim)))


class SwiGLU(nn.Cell):
    """down(SiLU(gate(x)) * up(x)) (Shazeer 2020), Llama's feed-forward; no biases."""

    def __init__(self, d_model: int, ff_dim: int, std: float, out_std: float) -> None:
        super().__init__()
        self.gate = dense(d_model, ff_dim, std, False)
        self.up = dense(d_model, ff_dim, std, False)
        self.down = dense(ff_dim, d_model, out_std, False)
        self.silu = nn.SiLU()

    def construct(self, x):
        return self.down(self.silu(self.gate(x)) * self.up(x))


@dataclass(frozen=True)
class BlockShape:
    """One decoder block as one card of a tensor-parallel group holds it: `heads`, `kv_heads` and `ffn` are
    the shard's (the full counts / tp), `hidden` and `head_dim` are whole; `seq` x `micro_batch` tokens."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    seq: int
    micro_batch: int

    @classmethod
    def per_shard(cls, p: LLMPreset, tensor_parallel: int = 1, micro_batch: int = 1) -> "BlockShape":
        for name in ("heads", "kv_heads", "ff_dim"):
            if getattr(p, name) % tensor_parallel:
                raise ValueError(f"tensor_parallel={tensor_parallel} does not divide {name}={getattr(p, name)}")
        return cls(hidden=p.d_model, heads=p.heads // tensor_parallel, kv_heads=p.kv_heads // tensor_parallel,
                   head_dim=p.head_dim, ffn=p.ff_dim // tensor_parallel, seq=p.seq_len, micro_batch=micro_batch)


class DecoderBlock(nn.Cell):
    """Pre-norm `x + attention(norm(x))`, `x + ffn(norm(x))`; the unit of full recompute and of a pipeline
    stage. `out_std` initialises the projections into the residual stream (GPT-2/3's 1/sqrt(2 layers))."""

    def __init__(self, p: LLMPreset, shape: BlockShape, flash: bool, out_std: float) -> None:
        super().__init__()
        self.recompute_unit = "full"           # workloads.base.marked_blocks
        self.attention_norm = make_norm(p.norm, shape.hidden)
        self.attention = GroupedQueryAttention(shape.hidden, shape.heads, shape.kv_heads, shape.head_dim,
                                               p.positions == "rotary", p.biased, flash, p.dropout, p.init_std,
                                               out_std, p.qkv_biased)
        self.ffn_norm = make_norm(p.norm, shape.hidden)
        if p.mlp == "swiglu":
            self.ffn = SwiGLU(shape.hidden, shape.ffn, p.init_std, out_std)
        else:
            self.ffn = FeedForward(shape.hidden, shape.ffn, "gelu_tanh", p.init_std, out_std)
        self.dropout = nn.Dropout(p=p.dropout)

    def construct(self, x, bias, cos, sin):
        x = x + self.dropout(self.attention(self.attention_norm(x), bias, cos, sin))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))

    def column_layers(self) -> list[nn.Dense]:
        ffn = [self.ffn.gate, self.ffn.up] if isinstance(self.ffn, SwiGLU) else [self.ffn.inner]
        return [self.attention.query, self.attention.key, self.attention.value, *ffn]

    def row_layers(self) -> list[nn.Dense]:
        return [self.attention.output, self.ffn.down if isinstance(self.ffn, SwiGLU) else self.ffn.outer]

    def shard_matmuls(self, column: "MatmulShard", row: "MatmulShard") -> None:
        """Megatron's layout (workloads/parallel_plan.py): Q/K/V and gate/up split their outputs
        over the tensor-parallel group, the output and down projections split their inputs."""
        for layer in self.column_layers():
            layer.matmul.shard(column.in_strategy)
        for layer in self.row_layers():
            if row.out_strategy is None:
                layer.matmul.shard(row.in_strategy)
            else:
                layer.matmul.shard(in_strategy=row.in_strategy, out_strategy=row.out_strategy)


def residual_std(p: LLMPreset) -> float:
    return p.init_std / math.sqrt(2 * p.layers)


class DecoderLM(nn.Cell):
    """Token embedding (plus GPT-3's learned positions), `layers` decoder blocks, a final norm and the LM
    head (tied to the token table for GPT-3, its own matrix for Llama 2): ids (B, T) -> logits (B, T, V)."""

    def __init__(self, p: LLMPreset, flash: bool = False) -> None:
        super().__init__()
        shape = BlockShape.per_shard(p)
        self.embeddings = Embeddings(p.vocab_size, p.d_model, p.seq_len, p.max_positions, 0, p.dropout, 0.0,
                                     p.init_std) if p.positions == "learned" else None
        if self.embeddings is None:
            self.token = nn.Embedding(p.vocab_size, p.d_model, embedding_table=ms.common.initializer.Normal(p.init_std))
        self.blocks = nn.CellList([DecoderBlock(p, shape, flash, residual_std(p)) for _ in range(p.layers)])
        self.final_norm = make_norm(p.norm, p.d_model)
        self.head = None if p.tied else dense(p.d_model, p.vocab_size, p.init_std, False)
        # a tied head over the token table of a rotary model (Qwen 1.5 0.5B): no Embeddings cell to share it with
        self.logits = ops.MatMul(transpose_b=True) if p.tied and self.embeddings is None else None
        self.causal = causal_bias(p.seq_len)
        self.cos, self.sin = rotary_tables(p.seq_len, p.head_dim)

    def construct(self, input_ids):
        x = self.token(input_ids) if self.embeddings is None else self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x, self.causal, self.cos, self.sin)
        h = self.final_norm(x)
        if self.head is not None:
            return self.head(h)
        if self.embeddings is not None:
            return self.embeddings.tied_logits(h)
        b, t, d = h.shape
        return ops.reshape(self.logits(ops.reshape(h, (b * t, d)), self.token.embedding_table), (b, t, -1))

    def parallel_layers(self) -> list[DecoderBlock]:
        return list(self.blocks)

    def embedding_stage(self, stage: int) -> None:
        (self.token if self.embeddings is None else self.embeddings).pipeline_stage = stage

    def head_stage(self, stage: int) -> None:
        self.final_norm.pipeline_stage = stage
        if self.head is not None:
            self.head.pipeline_stage = stage


class StandaloneBlock(nn.Cell):
    """One decoder block with its own causal mask and rotary tables: x (micro_batch, seq, hidden) -> same."""

    def __init__(self, p: LLMPreset, shape: BlockShape, flash: bool) -> None:
        super().__init__()
        self.block = DecoderBlock(p, shape, flash, residual_std(p))
        self.causal = causal_bias(shape.seq)
        self.cos, self.sin = rotary_tables(shape.seq, shape.head_dim)

    def construct(self, x):
        return self.block(x, self.causal, self.cos, self.sin)


def build_block(p: LLMPreset, shape: BlockShape, flash_attention: bool = False) -> nn.Cell:
    """ONE decoder block at per-shard shapes (see BlockShape.per_shard), for graph extraction."""
    return StandaloneBlock(p, shape, flash_attention)


def block_inputs(shape: BlockShape) -> tuple[np.ndarray]:
    """The block's input, the residual stream of one micro-batch: (micro_batch, seq, hidden) float32."""
    return (np.zeros((shape.micro_batch, shape.seq, shape.hidden), np.float32),)


class EmbeddingHead(nn.Cell):
    """The embedding and the LM head once, at a vocabulary shard: ids (micro_batch, seq) -> logits
    (micro_batch, seq, vocab / tp), the final norm included (GPT-3 ties the two tables, Llama does not)."""

    def __init__(self, p: LLMPreset, vocab_shard: int) -> None:
        super().__init__()
        self.tied = p.tied
        self.token = nn.Embedding(vocab_shard, p.d_model, embedding_table=ms.common.initializer.Normal(p.init_std))
        self.position = (nn.Embedding(p.max_positions, p.d_model) if p.positions == "learned" else None)
        self.position_ids = ms.Tensor(np.arange(p.seq_len, dtype=np.int32))
        self.final_norm = make_norm(p.norm, p.d_model)
        self.head = None if p.tied else dense(p.d_model, vocab_shard, p.init_std, False)
        self.logits = ops.MatMul(transpose_b=True)

    def construct(self, input_ids):
        x = self.token(input_ids)
        if self.position is not None:
            x = x + ops.expand_dims(self.position(self.position_ids), 0)
        h = self.final_norm(x)
        if self.head is not None:
            return self.head(h)
        b, t, d = h.shape
        return ops.reshape(self.logits(ops.reshape(h, (b * t, d)), self.token.embedding_table), (b, t, -1))


def build_embedding_head(p: LLMPreset, tensor_parallel: int = 1) -> nn.Cell:
    """The embedding + final norm + head once, with the vocabulary split over the tensor-parallel group
    (Megatron's vocab-parallel embedding; a vocabulary that does not divide is padded up, as Megatron does)."""
    return EmbeddingHead(p, -(-p.vocab_size // tensor_parallel))


def embedding_head_inputs(p: LLMPreset, micro_batch: int = 1) -> tuple[np.ndarray]:
    return (np.ones((micro_batch, p.seq_len), np.int32),)
