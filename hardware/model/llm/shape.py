"""The two small inputs of the LLM composition: the decoder's sizes and how the cards are split.

Framework-free, so the formulas can be tested without MindSpore. Sizes are per model (not per
shard); the parallel layout says how each is divided.
"""

from __future__ import annotations

from dataclasses import dataclass

from msbench.errors import ConfigError

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True)
class DecoderShape:
    """One decoder-only Transformer: `kv_heads < heads` is grouped-query attention, `gated_ffn` SwiGLU
    (three FFN matmuls, Llama), else a two-matmul GeLU FFN (GPT-3); `dropout` adds the 1-byte masks."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    gated_ffn: bool = True
    dropout: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


@dataclass(frozen=True, kw_only=True)
class Parallel:
    """tp × pp × dp cards; `micro_batch` samples per micro-batch, `micro_batches` per step (1F1B)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    micro_batches: int = 1
    sequence_parallel: bool = False
    optimizer_shard: bool = False
    recompute: str = "none"
    flash_attention: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "micro_batch", "micro_batches"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "an integer >= 1")
        if self.recompute not in RECOMPUTE:
            raise ConfigError("recompute", self.recompute, "|".join(RECOMPUTE))
        if self.sequence_parallel and self.tp == 1:
            raise ConfigError("sequence_parallel", True, "false unless tensor_parallel > 1")

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    def check(self, shape: DecoderShape) -> None:
        """Refuse a layout the shape cannot be split by, with the rule."""
        if shape.heads % self.tp or shape.kv_heads % self.tp:
            raise ConfigError("tensor_parallel", self.tp, f"a divisor of heads={shape.heads} and "
                              f"kv_heads={shape.kv_heads}")
        if shape.layers % self.pp:
            raise ConfigError("pipeline_stages", self.pp, f"a divisor of layers={shape.layers}")
