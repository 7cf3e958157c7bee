"""The three Transformer stacks built from the shared blocks, and their training losses."""

from __future__ import annotations

import math

import mindspore as ms
from mindspore import nn, ops

from workloads.transformer.config import IGNORE_INDEX, PAD, BertPreset, TransformerPreset
from workloads.transformer.layers import (DecoderLayer, Embeddings, EncoderLayer, activation_cell, causal_bias, dense,
                                         layer_norm, padding_bias)

class EncoderDecoder(nn.Cell):
    """Vaswani et al. 2017: post-LN ReLU layers, sinusoidal positions, one embedding table shared by the
    source, the target and the pre-softmax projection."""

    def __init__(self, p: TransformerPreset) -> None:
        super().__init__()
        eps = 1e-6  # tensor2tensor's LayerNorm epsilon
        self.embeddings = Embeddings(p.vocab_size, p.d_model, p.seq_len, 0, 0, p.dropout, 0.0, p.init_std)
        self.encoder = nn.CellList([EncoderLayer(p.d_model, p.ff_dim, p.heads, p.dropout, "relu", eps, False, p.init_std)
                                    for _ in range(p.layers)])
        self.decoder = nn.CellList([DecoderLayer(p.d_model, p.ff_dim, p.heads, p.dropout, "relu", eps, False, p.init_std)
                                    for _ in range(p.decoder_layers)])
        self.causal = causal_bias(p.seq_len)

    def construct(self, src_ids, tgt_ids):
        src_bias = padding_bias(src_ids, PAD)
        memory = self.embeddings(src_ids)
        for layer in self.encoder:
            memory = layer(memory, src_bias)
        x = self.embeddings(tgt_ids)
        for layer in self.decoder:
            x = layer(x, memory, self.causal, src_bias)
        return self.embeddings.tied_logits(x)


class Bert(nn.Cell):
    """Devlin et al. 2019: post-LN GELU encoder with the pre-training heads (masked LM on the gathered
    masked positions, tied to the token embedding, and next-sentence prediction on the pooled [CLS])."""

    def __init__(self, p: BertPreset) -> None:
        super().__init__()
        eps = 1e-12
        self.embeddings = Embeddings(p.vocab_size, p.d_model, p.seq_len, p.max_positions, 2, p.dropout, eps, p.init_std)
        self.encoder = nn.CellList([EncoderLayer(p.d_model, p.ff_dim, p.heads, p.dropout, p.activation, eps, False,
                                                 p.init_std) for _ in range(p.layers)])
        self.mlm_transform = dense(p.d_model, p.d_model, p.init_std)
        self.mlm_act = activation_cell(p.activation)
        self.mlm_norm = layer_norm(p.d_model, eps)
        self.mlm_bias = ms.Parameter(ops.zeros(p.vocab_size, ms.float32), name="mlm_bias")
        self.pooler = dense(p.d_model, p.d_model, p.init_std)
        self.pooler_act = nn.Tanh()
        self.nsp = dense(p.d_model, 2, p.init_std)

    def construct(self, input_ids, token_type_ids, masked_positions):
        bias = padding_bias(input_ids, PAD)
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder:
            x = layer(x, bias)
        b, t, d = x.shape
        offsets = masked_positions + ops.expand_dims(ops.arange(b, dtype=ms.int32) * t, 1)
        picked = ops.gather(ops.reshape(x, (b * t, d)), ops.reshape(offsets, (-1,)), 0)
        h = self.mlm_norm(self.mlm_act(self.mlm_transform(picked)))
        mlm_logits = self.embeddings.tied_logits(h) + self.mlm_bias
        pooled = self.pooler_act(self.pooler(x[:, 0]))
        return ops.reshape(mlm_logits, (b, masked_positions.shape[1], -1)), self.nsp(pooled)


class GPT2(nn.Cell):
    """Radford et al. 2019: pre-LN GELU (tanh) blocks under a causal mask, a final LayerNorm, learned
    positions, residual projections initialised N(0, std / sqrt(2 * layers)) and logits tied to the token
    embedding."""

    def __init__(self, p: TransformerPreset) -> None:
        super().__init__()
        eps = 1e-5
        self.embeddings = Embeddings(p.vocab_size, p.d_model, p.seq_len, p.max_positions, 0, p.dropout, 0.0, p.init_std)
        residual_std = p.init_std / math.sqrt(2 * p.layers)  # GPT-2 sec. 2.3: residual layers scaled by 1/sqrt(N)
        self.blocks = nn.CellList([EncoderLayer(p.d_model, p.ff_dim, p.heads, p.dropout, "gelu_tanh", eps, True, p.init_std,
                                                residual_std) for _ in range(p.layers)])
        self.final_norm = layer_norm(p.d_model, eps)
        self.causal = causal_bias(p.seq_len)

    def construct(self, input_ids):
        x = self.embeddings(input_ids)
        for block in self.blocks:
            x = block(x, self.causal)
        return self.embeddings.tied_logits(self.final_norm(x))


class TokenCrossEntropy(nn.Cell):
    """Mean cross-entropy over the labelled tokens of (B, T, V) logits; IGNORE_INDEX labels are skipped."""

    def construct(self, logits, labels):
        return ops.cross_entropy(ops.reshape(logits, (-1, logits.shape[-1])), ops.reshape(labels, (-1,)),
                                 ignore_index=IGNORE_INDEX)


class SmoothedTokenCrossEntropy(nn.Cell):
    """Label-smoothed token cross-entropy in the model-zoo Transformer's form: the target is an explicit
    (tokens, V) one-hot with 1 - eps on the label and eps / (V - 1) elsewhere, multiplied by the log-softmax and
    summed over V, then averaged over the labelled tokens: the model zoo's step launches that (tokens, V) OneHot
    and Mul, and one LogSoftmax where `ops.cross_entropy` composes ReduceMax, Sub, Exp, ReduceSum and Log."""

    def __init__(self, vocab_size: int, smoothing: float) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.on_value = ms.Tensor(1.0 - smoothing, ms.float32)
        self.off_value = ms.Tensor(smoothing / (vocab_size - 1), ms.float32)

    def construct(self, logits, labels):
        flat = ops.reshape(logits, (-1, self.vocab_size))
        labels = ops.reshape(labels, (-1,))
        weights = ops.cast(labels != IGNORE_INDEX, ms.float32)
        target = ops.one_hot(ops.maximum(labels, 0), self.vocab_size, self.on_value, self.off_value)
        per_token = -ops.sum(ops.log_softmax(flat, -1) * target, -1)
        return ops.sum(per_token * weights) / (ops.sum(weights) + 1e-5)


class BertPretrainingLoss(nn.Cell):
    """Masked-LM cross-entropy (unused prediction slots are IGNORE_INDEX) plus next-sentence cross-entropy."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = TokenCrossEntropy()

    def construct(self, mlm_logits, nsp_logits, masked_ids, nsp_label):
        return self.tokens(mlm_logits, masked_ids) + ops.cross_entropy(nsp_logits, nsp_label)
