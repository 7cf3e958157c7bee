"""The Transformer family's preset fields, vocabulary layout and label conventions (framework-free)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from msbench.errors import ConfigError
from workloads.base import Preset

PAD = 0              # padding token id in every vocabulary (masked out of attention)
IGNORE_INDEX = -100  # label value the loss and the metric skip (padding, unmasked BERT positions)
TASKS = {"encoder-decoder": ("copy", "reverse", "sort"), "encoder": ("mlm",), "decoder": ("lm",)}
MASK_PROB = 0.15     # BERT masks 15% of tokens: 80% [MASK], 10% random, 10% unchanged


@dataclass(frozen=True, kw_only=True)
class TransformerPreset(Preset):
    """Sizes of one Transformer; `layers` counts encoder layers (and GPT-2 blocks), `decoder_layers` the
    decoder's (encoder-decoder only)."""

    vocab_size: int
    seq_len: int          # tokens per sequence (source and target alike for encoder-decoder)
    d_model: int
    ff_dim: int
    heads: int
    layers: int
    decoder_layers: int
    max_positions: int    # learned position table size (BERT 512, GPT-2 1024); 0 = sinusoidal positions
    dropout: float
    init_std: float       # weights N(0, init_std) (BERT/GPT-2 initializer_range 0.02); 0 = Glorot (Vaswani)
    task: str             # copy|reverse|sort (encoder-decoder), mlm (BERT), lm (GPT-2)

    def __post_init__(self) -> None:
        where = f"preset {self.name}"
        for key in ("vocab_size", "seq_len", "d_model", "ff_dim", "heads", "layers", "batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(key, getattr(self, key), "an integer >= 1", where)
        if self.d_model % self.heads:
            raise ConfigError("heads", self.heads, f"a divisor of d_model={self.d_model}", where)
        if self.max_positions and self.seq_len > self.max_positions:
            raise ConfigError("seq_len", self.seq_len, f"1..{self.max_positions} (max_positions)", where)
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("dropout", self.dropout, "0 <= dropout < 1", where)
        if self.init_std < 0:
            raise ConfigError("init_std", self.init_std, ">= 0 (0 = Glorot-uniform)", where)
        if self.task not in sum(TASKS.values(), ()):
            raise ConfigError("task", self.task, "|".join(sum(TASKS.values(), ())), where)

    @property
    def max_predictions(self) -> int:
        """BERT's masked_lm_positions slots: 15% of seq_len rounded up to a multiple of 5 (20 at 128, 80 at 512,
        the max_predictions_per_seq of Google's pre-training scripts)."""
        return 5 * math.ceil(self.seq_len * MASK_PROB / 5)


# BERT's FFN and MLM-head activation: the tanh GELU of Google's released modeling.py and of MindSpore's model-zoo
# BERT (its `nn.Dense(activation="gelu")` is nn.GELU(approximate=True), MindSpore's default: one GeLU kernel), or
# the exact erf form (nn.GELU(approximate=False), composed of Erf/Div/Mul/Add kernels on every backend).
BERT_ACTIVATIONS = ("gelu", "gelu_tanh")


@dataclass(frozen=True, kw_only=True)
class BertPreset(TransformerPreset):
    """A BERT: the Transformer fields and the activation of its FFN and MLM head."""

    activation: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.activation not in BERT_ACTIVATIONS:
            raise ConfigError("activation", self.activation, "|".join(BERT_ACTIVATIONS), f"preset {self.name}")


@dataclass(frozen=True, kw_only=True)
class Seq2SeqPreset(TransformerPreset):
    """An encoder-decoder Transformer and its loss: label smoothing > 0 is Vaswani et al.'s (0.1, sec. 5.4) as
    MindSpore's model-zoo Transformer computes it, an explicit (tokens x vocab) smoothed one-hot target times the
    log-probabilities; 0 is plain token cross-entropy (the tiny presets: their committed CPU measurements ran it)."""

    label_smoothing: float

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError("label_smoothing", self.label_smoothing, "0 <= label_smoothing < 1", f"preset {self.name}")


LLM_MLPS = ("swiglu", "gelu")          # Llama's gated SiLU FFN (Shazeer 2020) or GPT-3's GELU FFN
LLM_NORMS = ("rmsnorm", "layernorm")    # Llama's RMSNorm (Zhang & Sennrich 2019) or GPT-3's LayerNorm
LLM_POSITIONS = ("rotary", "learned")   # rotary embeddings (Su et al. 2021) or a learned table (GPT-3)


@dataclass(frozen=True, kw_only=True)
class LLMPreset(TransformerPreset):
    """A decoder-only LLM (Llama 2, GPT-3): pre-norm blocks, `kv_heads` < `heads` for grouped-query attention
    (Ainslie et al. 2023), and the choices that tell the two families apart. `tied` shares the token table with
    the output head (GPT-3, as GPT-2); Llama 2 has its own head. Projections carry biases only with LayerNorm
    (GPT-3); Llama's have none, but Qwen's and ChatGLM's query, key and value projections do (`qkv_bias`: a
    preset that leaves it out has none, so the presets written before it stay as they were)."""

    kv_heads: int
    mlp: str
    norm: str
    positions: str
    tied: bool
    qkv_bias: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        where = f"preset {self.name}"
        if self.kv_heads < 1 or self.heads % self.kv_heads:
            raise ConfigError("kv_heads", self.kv_heads, f"a divisor of heads={self.heads}", where)
        for key, allowed in (("mlp", LLM_MLPS), ("norm", LLM_NORMS), ("positions", LLM_POSITIONS)):
            if getattr(self, key) not in allowed:
                raise ConfigError(key, getattr(self, key), "|".join(allowed), where)
        if (self.positions == "learned") != (self.max_positions > 0):
            raise ConfigError("max_positions", self.max_positions,
                              ">= seq_len with positions=learned, 0 with positions=rotary", where)
        if self.positions == "rotary" and self.head_dim % 2:
            raise ConfigError("heads", self.heads, "a count giving an even head dimension (rotary pairs)", where)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def biased(self) -> bool:
        """GPT-3 keeps GPT-2's projection biases; Llama drops them."""
        return self.norm == "layernorm"

    @property
    def qkv_biased(self) -> bool:
        """Biases on the query, key and value projections: GPT-3's (all projections), or Qwen's and ChatGLM's."""
        return self.biased or self.qkv_bias


def is_llm_preset(preset: object) -> bool:
    """A decoder-only LLM preset (grouped-query heads and an FFN kind): the device model predicts it by
    composing compiled blocks (a zoo or plugin preset with those fields counts too)."""
    return hasattr(preset, "kv_heads") and hasattr(preset, "mlp")


def llm_parameter_count(p: LLMPreset) -> int:
    """Trainable parameters of the decoder-only network built from `p`, counted from its shapes (the test checks
    this against the tiny network's real `trainable_params` and the full sizes against the published counts)."""
    d, kv_dim, bias, qkv_bias = p.d_model, p.kv_heads * p.head_dim, int(p.biased), int(p.qkv_biased)
    attention = 2 * d * d + 2 * d * kv_dim + qkv_bias * (d + 2 * kv_dim) + bias * d   # Q, O and K, V; biases
    ffn = 3 * d * p.ff_dim if p.mlp == "swiglu" else 2 * d * p.ff_dim + bias * (p.ff_dim + d)
    norm = d if p.norm == "rmsnorm" else 2 * d
    embeddings = p.vocab_size * d * (1 if p.tied else 2) + p.max_positions * d
    return p.layers * (attention + ffn + 2 * norm) + norm + embeddings


def llm_forward_flops(p: LLMPreset) -> int:
    """Forward FLOPs of one sequence (2 x multiply-accumulates of the matrix ops, the convention of
    hardware.model.graph.forward_flops): every projection and the LM head once per token, and per layer the
    two attention products Q K^T and P V over the whole T x T score matrix (the plain kernel computes the
    masked half too). Checked against forward_flops of the real tiny networks."""
    d, kv_dim, t = p.d_model, p.kv_heads * p.head_dim, p.seq_len
    per_token = 2 * d * d + 2 * d * kv_dim + (3 if p.mlp == "swiglu" else 2) * d * p.ff_dim
    head = p.vocab_size * d
    return 2 * t * (p.layers * per_token + head) + p.layers * 4 * t * t * d
