"""Compile one tensor-parallel rank's decoder block, or the embedding + head, as a training step.

The workload's own cells (workloads/transformer/llm.py: `build_block` at `BlockShape.per_shard`, and
`build_embedding_head`) are trained by the same step builder a real run uses (workloads/train_step.py:
AMP, recompute marks, the optimizer), so the extracted kernels are the real ones at per-shard shapes,
and nothing of the size of the model is ever built. The block alone has no loss of its own: its
backward starts from `Cotangent`, a gradient of its output's shape that is an input of the step, as a
real block's starts from the next block's. The compile runs in `hardware.model.extract`'s child
(request kind `llm_part`); the parent side caches the graph through msbench/cache.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from hardware.model.graph import PARSER_SOURCES, GraphCompile, compiled_graph, graph_knobs, mindspore_version, workload_sources
from hardware.model.opgraph import OpGraph
from msbench.cache import content_key, source_hash
from hardware.model.step_compile import compile_step
from msbench.settings import Settings, make_settings
from workloads.registry import get_workload

SCHEMA = 1
PARTS = ("block", "ends")


class PartWorkload:
    """The slice of the Workload contract `build_train_step` reads, for one part of an LLM."""

    def __init__(self, llm: Any, preset: Any, part: str, tensor_parallel: int, micro_batch: int) -> None:
        self.llm, self.preset, self.part = llm, preset, part
        self.tensor_parallel, self.micro_batch = tensor_parallel, micro_batch

    def build_network(self, preset: Any) -> Any:
        # imports MindSpore: only in the extraction child
        from workloads.transformer.llm import BlockShape, build_block, build_embedding_head

        if self.part == "block":
            return build_block(preset, BlockShape.per_shard(preset, self.tensor_parallel, self.micro_batch))
        return build_embedding_head(preset, 1)          # `preset.vocab_size` is already the rank's shard

    def build_parallel_network(self, preset: Any, settings: Settings) -> Any:
        """One card's part: the tensor-parallel split is in its shapes, not in shard strategies."""
        return self.build_network(preset)

    def build_loss(self, preset: Any) -> Any:
        return cotangent_loss() if self.part == "block" else self.llm.build_loss(preset)

    def columns(self, preset: Any) -> tuple[list[str], list[str]]:
        return (["hidden"], ["target"]) if self.part == "block" else self.llm.columns(preset)

    def synthetic_batch(self, preset: Any, batch_size: int) -> list[Any]:
        import numpy as np

        if self.part == "block":
            shape = (batch_size, preset.seq_len, preset.d_model)
            return [np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
        return list(self.llm.synthetic_batch(preset, batch_size))

    def recompute_blocks(self, network: Any, full: bool) -> list[Any]:
        return self.llm.recompute_blocks(network, full) if self.part == "block" else []


def cotangent_loss() -> Any:
    """The block's stand-in loss: sum(output · cotangent), whose gradient is the cotangent (a custom bprop
    returns it as it is). Its forward adds one Mul and one ReduceSum of b·s·h, a small over-count beside the
    block's matmuls, and its backward none. MSELoss, used before, added five kernels more, and MindSpore
    constant-folded its mean's gradient into a b·s·h tensor (537 MB for a 70B block at micro-batch 4): a
    third of that block's compile time."""
    from mindspore import nn, ops

    class Cotangent(nn.Cell):
        def construct(self, out, cotangent):
            return (out * cotangent).sum()

        def bprop(self, out, cotangent, res, dout):
            return cotangent * dout, ops.zeros_like(cotangent)

    return Cotangent()


def compile_llm_part(request: dict[str, Any]) -> dict[str, Any]:
    """Child side: build and compile the part's training step on a synthetic micro-batch."""
    settings = make_settings({**request["settings"], "devices": 1})
    llm = get_workload(request["workload"])
    preset = llm.preset(request["preset"], request.get("overrides") or {})
    if request["part"] == "ends":
        preset = dataclasses.replace(preset, vocab_size=request["vocab"])
    adapter = PartWorkload(llm, preset, request["part"], request["tensor_parallel"], request["micro_batch"])
    return compile_step(adapter, preset, settings)


def part_compile(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings, part: str,
                 tensor_parallel: int, micro_batch: int, vocab: int = 0) -> GraphCompile:
    sources = (*PARSER_SOURCES, Path(__file__))
    key = content_key("llm-part", SCHEMA, mindspore_version(), source_hash(workload_sources(workload)),
                      source_hash(sources), workload, preset, dict(overrides), graph_knobs(settings), part,
                      tensor_parallel, micro_batch, vocab)
    request = {"kind": "llm_part", "workload": workload, "preset": preset, "overrides": dict(overrides),
               "settings": settings.to_dict(), "part": part, "tensor_parallel": tensor_parallel,
               "micro_batch": micro_batch, "vocab": vocab}
    return GraphCompile(key, request, settings, {"llm_part": part})


def part_graph(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings, part: str,
               tensor_parallel: int, micro_batch: int, vocab: int = 0) -> OpGraph:
    """The part's OpGraph (cached by content; cold: one compile in a child process, seconds)."""
    return compiled_graph(part_compile(workload, preset, overrides, settings, part, tensor_parallel, micro_batch, vocab))
