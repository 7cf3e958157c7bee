"""Shared Transformer blocks: attention (BatchMatMul), feed-forward, embeddings, encoder and decoder layers.

One set of blocks builds all three published stacks: post-LN ReLU layers with sinusoidal positions
(Vaswani et al. 2017), post-LN GELU layers with learned positions and token types (BERT, Devlin et al.
2019) and pre-LN GELU layers with learned positions (GPT-2, Radford et al. 2019).
"""

from __future__ import annotations

import math

import numpy as np
import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Normal, XavierUniform

NEG_INF = -1e4  # additive mask value: exp(-1e4) underflows to 0 in fp32 and fp16 alike


def dense(d_in: int, d_out: int, std: float, has_bias: bool = True) -> nn.Dense:
    """A Dense layer with zero bias and weights N(0, std) (BERT/GPT-2's initializer_range), or Glorot-uniform
    when std is 0 (Vaswani et al.'s tensor2tensor and fairseq)."""
    return nn.Dense(d_in, d_out, weight_init=Normal(std) if std > 0 else XavierUniform(), bias_init="zeros",
                    has_bias=has_bias)


def layer_norm(d: int, eps: float) -> nn.LayerNorm:
    return nn.LayerNorm((d,), epsilon=eps)


def padding_bias(ids: ms.Tensor, pad_id: int) -> ms.Tensor:
    """(B, 1, 1, T) additive bias that hides padded keys."""
    keep = ops.cast(ops.not_equal(ids, pad_id), ms.float32)
    return ops.expand_dims(ops.expand_dims((1.0 - keep) * NEG_INF, 1), 1)


def causal_bias(seq_len: int) -> ms.Tensor:
    """(1, 1, T, T) additive bias that hides future positions (a constant of the graph). Filled row by row
    in place: at an LLM's T = 4096 the triu/multiply temporaries were 3 more 64 MiB arrays, about 1.8 s
    of each block extraction on this VM. The values are the ones `triu(ones) * NEG_INF` gives, -0.0 on
    and below the diagonal included."""
    bias = np.full((seq_len, seq_len), -0.0, np.float32)
    for row in range(seq_len - 1):
        bias[row, row + 1:] = NEG_INF
    return ms.Tensor(bias[None, None])


class AttentionCore(nn.Cell):
    """softmax(Q K^T / sqrt(d_head) + bias) V over (B, H, T, d_head) tensors.

    Selective recompute marks this block: its activations grow with T^2 while its FLOPs are small
    (Korthikanti et al. 2022, "Reducing activation recomputation in large transformer models").
    """

    recompute_unit = "selective"      # workloads.base.marked_blocks

    def __init__(self, head_dim: int, dropout: float) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)
        self.scores = ops.BatchMatMul(transpose_b=True)
        self.mix = ops.BatchMatMul()
        self.softmax = nn.Softmax(axis=-1)
        self.dropout = nn.Dropout(p=dropout)

    def construct(self, q, k, v, bias):
        scores = self.scores(q, k) * self.scale + bias
        return self.mix(self.dropout(self.softmax(scores)), v)


class MultiHeadAttention(nn.Cell):
    """Q/K/V projections, split into heads, the attention core, merge and output projection."""

    def __init__(self, d_model: int, heads: int, dropout: float, std: float, out_std: float | None = None) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d_model // heads
        self.query = dense(d_model, d_model, std)
        self.key = dense(d_model, d_model, std)
        self.value = dense(d_model, d_model, std)
        self.core = AttentionCore(self.head_dim, dropout)
        self.output = dense(d_model, d_model, std if out_std is None else out_std)

    def split(self, x):
        b, t, _ = x.shape
        return ops.transpose(ops.reshape(x, (b, t, self.heads, self.head_dim)), (0, 2, 1, 3))

    def construct(self, x, memory, bias):
        b, t, d = x.shape
        context = self.core(self.split(self.query(x)), self.split(self.key(memory)), self.split(self.value(memory)), bias)
        return self.output(ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (b, t, d)))


def activation_cell(name: str) -> nn.Cell:
    """The activation by its preset name: `gelu` is the exact erf form, `gelu_tanh` MindSpore's GeLU kernel."""
    return {"relu": nn.ReLU, "gelu": lambda: nn.GELU(approximate=False),
            "gelu_tanh": lambda: nn.GELU(approximate=True)}[name]()


class FeedForward(nn.Cell):
    """Position-wise Dense -> activation -> Dense."""

    def __init__(self, d_model: int, ff_dim: int, activation: str, std: float, out_std: float | None = None) -> None:
        super().__init__()
        self.inner = dense(d_model, ff_dim, std)
        self.act = activation_cell(activation)
        self.outer = dense(ff_dim, d_model, std if out_std is None else out_std)

    def construct(self, x):
        return self.outer(self.act(self.inner(x)))


class Residual(nn.Cell):
    """One sublayer with its residual and LayerNorm: post-LN `LN(x + f(x))` or pre-LN `x + f(LN(x))`."""

    def __init__(self, d_model: int, dropout: float, eps: float, pre_ln: bool) -> None:
        super().__init__()
        self.norm = layer_norm(d_model, eps)
        self.dropout = nn.Dropout(p=dropout)
        self.pre_ln = pre_ln

    def before(self, x):
        if self.pre_ln:
            return self.norm(x)
        return x

    def after(self, x, y):
        if self.pre_ln:
            return x + self.dropout(y)
        return self.norm(x + self.dropout(y))


class EncoderLayer(nn.Cell):
    """Self-attention and feed-forward (also GPT-2's block, given a causal bias). `out_std` initialises the
    two projections that write into the residual stream (GPT-2 scales them by 1/sqrt(2 * layers))."""

    def __init__(self, d_model: int, ff_dim: int, heads: int, dropout: float, activation: str, eps: float,
                 pre_ln: bool, std: float, out_std: float | None = None) -> None:
        super().__init__()
        self.recompute_unit = "full"           # workloads.base.marked_blocks
        self.attention = MultiHeadAttention(d_model, heads, dropout, std, out_std)
        self.attention_residual = Residual(d_model, dropout, eps, pre_ln)
        self.ffn = FeedForward(d_model, ff_dim, activation, std, out_std)
        self.ffn_residual = Residual(d_model, dropout, eps, pre_ln)

    def construct(self, x, bias):
        h = self.attention_residual.before(x)
        x = self.attention_residual.after(x, self.attention(h, h, bias))
        return self.ffn_residual.after(x, self.ffn(self.ffn_residual.before(x)))


class DecoderLayer(nn.Cell):
    """Masked self-attention, encoder-decoder attention and feed-forward (Vaswani et al. 2017, fig. 1)."""

    def __init__(self, d_model: int, ff_dim: int, heads: int, dropout: float, activation: str, eps: float,
                 pre_ln: bool, std: float) -> None:
        super().__init__()
        self.recompute_unit = "full"           # workloads.base.marked_blocks
        self.self_attention = MultiHeadAttention(d_model, heads, dropout, std)
        self.self_residual = Residual(d_model, dropout, eps, pre_ln)
        self.cross_attention = MultiHeadAttention(d_model, heads, dropout, std)
        self.cross_residual = Residual(d_model, dropout, eps, pre_ln)
        self.ffn = FeedForward(d_model, ff_dim, activation, std)
        self.ffn_residual = Residual(d_model, dropout, eps, pre_ln)

    def construct(self, x, memory, self_bias, memory_bias):
        h = self.self_residual.before(x)
        x = self.self_residual.after(x, self.self_attention(h, h, self_bias))
        x = self.cross_residual.after(x, self.cross_attention(self.cross_residual.before(x), memory, memory_bias))
        return self.ffn_residual.after(x, self.ffn(self.ffn_residual.before(x)))


def sinusoid_table(seq_len: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017, sec. 3.5)."""
    pos = np.arange(seq_len, dtype=np.float64)[:, None]
    rate = np.power(10000.0, -np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((seq_len, d_model), np.float64)
    table[:, 0::2] = np.sin(pos * rate)
    table[:, 1::2] = np.cos(pos * rate)
    return table.astype(np.float32)


class Embeddings(nn.Cell):
    """Token embedding plus positions: learned (`max_positions` > 0) or sinusoidal (0, scaled by sqrt(d)).

    `type_vocab` > 0 adds BERT's segment embedding; `norm_eps` > 0 adds BERT's embedding LayerNorm.
    The token table is shared with the output projection (`tied_logits`); it is N(0, std), or N(0, d^-0.5)
    when std is 0 (Vaswani et al.).
    """

    def __init__(self, vocab_size: int, d_model: int, seq_len: int, max_positions: int, type_vocab: int,
                 dropout: float, norm_eps: float, std: float) -> None:
        super().__init__()
        self.learned_positions = max_positions > 0
        self.token = nn.Embedding(vocab_size, d_model, embedding_table=Normal(std if std > 0 else d_model ** -0.5))
        self.scale = 1.0 if self.learned_positions else math.sqrt(d_model)
        if self.learned_positions:
            self.position = nn.Embedding(max_positions, d_model, embedding_table=Normal(std))
            self.position_ids = ms.Tensor(np.arange(seq_len, dtype=np.int32))
        else:
            self.sinusoid = ms.Tensor(sinusoid_table(seq_len, d_model)[None])
        self.with_types = type_vocab > 0
        if self.with_types:
            self.token_type = nn.Embedding(type_vocab, d_model, embedding_table=Normal(std))
        self.with_norm = norm_eps > 0
        if self.with_norm:
            self.norm = layer_norm(d_model, norm_eps)
        self.dropout = nn.Dropout(p=dropout)
        self.logits_matmul = ops.MatMul(transpose_b=True)

    def positions(self):
        if self.learned_positions:
            return ops.expand_dims(self.position(self.position_ids), 0)
        return self.sinusoid

    def construct(self, ids, type_ids=None):
        x = self.token(ids) * self.scale + self.positions()
        if self.with_types:
            x = x + self.token_type(type_ids)
        if self.with_norm:
            x = self.norm(x)
        return self.dropout(x)

    def tied_logits(self, h):
        """h (..., d) @ token_table^T -> (..., vocab): the output projection shares the input embedding."""
        shape = h.shape
        flat = self.logits_matmul(ops.reshape(h, (-1, shape[-1])), self.token.embedding_table)
        return ops.reshape(flat, shape[:-1] + (flat.shape[-1],))
