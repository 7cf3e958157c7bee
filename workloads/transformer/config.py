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
