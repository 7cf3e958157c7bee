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

import contextlib
import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from hardware.model.graph import (COMPILE_CHILDREN, PARSER_SOURCES, compile_concurrently, graph_knobs, graph_meta,
                                  mindspore_version, run_extract, run_extract_batch, workload_sources)
from hardware.model.opgraph import OpGraph
from msbench.cache import cache_has, cache_lock, cache_put, cached, content_key, source_hash
from msbench.settings import Settings

CACHE_KIND = "opgraph"
SCHEMA = 1
PARTS = ("block", "ends")
MIN_CHUNK = 4          # parts per child at least: a child's MindSpore import is about one part's compile


class PartWorkload:
    """The slice of the Workload contract `build_train_step` reads, for one part of an LLM."""

    def __init__(self, llm: Any, preset: Any, part: str, tensor_parallel: int, micro_batch: int) -> None:
        self.llm, self.preset, self.part = llm, preset, part
        self.tensor_parallel, self.micro_batch = tensor_parallel, micro_batch

    def build_network(self, preset: Any) -> Any:
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
    from hardware.model.extract import compile_step
    from msbench.settings import make_settings
    from workloads.registry import get_workload

    settings = make_settings({**request["settings"], "devices": 1})
    llm = get_workload(request["workload"])
    preset = llm.preset(request["preset"], request.get("overrides") or {})
    if request["part"] == "ends":
        preset = dataclasses.replace(preset, vocab_size=request["vocab"])
    adapter = PartWorkload(llm, preset, request["part"], request["tensor_parallel"], request["micro_batch"])
    return compile_step(adapter, preset, settings)


@dataclass(frozen=True)
class PartCompile:
    """One part's cache key, the child request that compiles it, and the settings its meta is read with."""
    key: str
    request: dict[str, Any]
    settings: Settings

    def entry(self, result: dict[str, Any]) -> dict[str, Any]:
        """The cache entry (an OpGraph's dict) of the child's answer."""
        r = self.request
        return {"workload": r["workload"], "preset": r["preset"], "batch_size": result["batch_size"],
                "grad_accum": result["grad_accum"], "ops": result["ops"], "param_count": result["param_count"],
                "param_bytes": result["param_bytes"], "activation_bytes": result["activation_bytes"],
                "key": self.key, "meta": {**graph_meta(result, self.settings), "llm_part": r["part"]}}


def part_compile(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings, part: str,
                 tensor_parallel: int, micro_batch: int, vocab: int = 0) -> PartCompile:
    sources = (*PARSER_SOURCES, Path(__file__))
    key = content_key("llm-part", SCHEMA, mindspore_version(), source_hash(workload_sources(workload)),
                      source_hash(sources), workload, preset, dict(overrides), graph_knobs(settings), part,
                      tensor_parallel, micro_batch, vocab)
    request = {"kind": "llm_part", "workload": workload, "preset": preset, "overrides": dict(overrides),
               "settings": settings.to_dict(), "part": part, "tensor_parallel": tensor_parallel,
               "micro_batch": micro_batch, "vocab": vocab}
    return PartCompile(key, request, settings)


def part_graph(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings, part: str,
               tensor_parallel: int, micro_batch: int, vocab: int = 0) -> OpGraph:
    """The part's OpGraph (cached by content; cold: one compile in a child process, seconds)."""
    return compiled_part(part_compile(workload, preset, overrides, settings, part, tensor_parallel, micro_batch, vocab))


def compiled_part(job: PartCompile) -> OpGraph:
    data, _ = cached(CACHE_KIND, job.key, lambda: job.entry(run_extract(job.request)), validate=OpGraph.from_dict)
    return OpGraph.from_dict(data)


def compile_missing_parts(jobs: Iterable[PartCompile]) -> None:
    """Compile the parts not yet cached in COMPILE_CHILDREN extraction children at a time, a chunk of
    parts per child one after another (MindSpore imported once per child, not once per part), and cache
    them. Chunks are taken from one queue as children finish, largest first, so a matrix's plan of many
    parts keeps both children busy to its end, and a chunk's parts are cached as soon as its child answers. A chunk's locks are taken in key order, so runs and
    cells compiling overlapping sets wait for each other and never deadlock. A part that failed is left
    uncached: `part_graph` compiles it alone and reports its error."""
    missing = missing_parts(jobs)
    if len(missing) < 2:
        return
    queue = ChunkQueue(missing, COMPILE_CHILDREN)
    compile_concurrently([queue.drain] * min(COMPILE_CHILDREN, len(missing)))


def missing_parts(jobs: Iterable[PartCompile]) -> list[PartCompile]:
    """The distinct parts not yet cached, blocks first (the dearer compiles), then by key."""
    return sorted({job.key: job for job in jobs if not cache_has(CACHE_KIND, job.key)}.values(),
                  key=lambda job: (job.request["part"] != "block", job.key))


class ChunkQueue:
    """Guided self-scheduling (Polychronopoulos & Kuck, 1987): each chunk is a share of what is left,
    ceil(left / 2·children), but never fewer than MIN_CHUNK parts (nor more than a child's even share),
    so that few children are started and the last ones are short."""

    def __init__(self, jobs: list[PartCompile], children: int) -> None:
        self.jobs, self.children, self.lock = list(jobs), children, threading.Lock()

    def take(self) -> list[PartCompile]:
        with self.lock:
            left = len(self.jobs)
            size = max(-(-left // (2 * self.children)), min(MIN_CHUNK, -(-left // self.children)))
            chunk, self.jobs = self.jobs[:size], self.jobs[size:]
            return chunk

    def drain(self) -> None:
        while chunk := self.take():
            compile_chunk(chunk)


def compile_chunk(chunk: list[PartCompile]) -> None:
    with contextlib.ExitStack() as locks:
        for job in sorted(chunk, key=lambda job: job.key):
            locks.enter_context(cache_lock(CACHE_KIND, job.key))
        todo = [job for job in chunk if not cache_has(CACHE_KIND, job.key)]   # another cell may have meanwhile
        if not todo:
            return
        for job, result in zip(todo, run_extract_batch([job.request for job in todo])):
            if result is not None:
                cache_put(CACHE_KIND, job.key, job.entry(result))
