"""One tensor-parallel rank's decoder block and the model's two ends, from small real extractions.

The cost of extraction does not grow with the model's depth, vocabulary or batch: MindSpore compiles the
workload's own block at the rank's shapes (heads, kv heads and FFN width over tensor_parallel) once,
and the embedding + final norm + head (+ loss) at two small reference vocabularies (hardware/model/
llm/parts.py). The ends at the rank's vocabulary shard (vocab / tp) come from scaling every
vocabulary-sized dimension along the two references, exactly as `scaling.scale_batch` scales the
batch; where the two do not align, the shard is compiled directly. Micro-batches above the reference
batches are scaled from two small ones the same way, and so is a wide rank: a block at tensor_parallel
1 or 2 is scaled from the rank shapes at 8 and 4 (`scale_width`), where those divide the model. The
hidden size and seq_len are compiled as they are. Each compile is cached.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from hardware.model.compute import Kernel, kernels
from hardware.model.estimates import estimates_used
from hardware.model.llm.compose import PassCost
from hardware.model.llm.flash import fused_attention as fused_attention_ops
from hardware.model.llm.memory import StageParams
from hardware.model.graph import CACHE_KIND, GraphCompile, compile_missing_graphs, compiled_graph
from hardware.model.llm.parts import part_compile
from hardware.model.lowering import lower
from hardware.model.opgraph import Op, OpGraph
from hardware.model.predict import phase_seconds
from hardware.model.profile import HardwareProfile
from hardware.model.scaling import (REFERENCE_BATCHES, affine, compile_batches, recount, scale_batch, scale_casts,
                                    scale_kept, scale_op)
from msbench.cache import cache_dir
from msbench.settings import Settings

REFERENCE_VOCABS = (256, 512)     # small, and apart from every other dimension of the tiny and full presets
# A block is compiled at these tensor-parallel ranks' shapes (narrow, wide) and scaled to wider ones.
REFERENCE_TENSOR_PARALLEL = (8, 4)
# The graphs already composed in this process, by cache directory and the cell's part keys: a matrix predicts many cells
# of one block and ends (every pipeline layout, optimizer shard and flash attention choice), and loading and
# scaling them again was most of a warm cell's time (0.19 of its 0.22 s in llm.toml).
_COMPOSED: dict[tuple[str, str], "LlmGraphs"] = {}


@dataclass(frozen=True)
class LlmGraphs:
    block: OpGraph         # one decoder block on one tensor-parallel rank
    ends: OpGraph          # embedding + final norm + head + loss at the rank's vocabulary shard
    params_per_token: int  # parameters per vocabulary entry (the token table, and the head when untied)


def scale_vocab(g1: OpGraph, g2: OpGraph, v1: int, v2: int, vocab: int) -> OpGraph | None:
    """`g1`/`g2` compiled at vocabularies v1 < v2 with all else equal, at `vocab` (None: not affine)."""
    if len(g1.ops) != len(g2.ops) or g1.batch_size != g2.batch_size:
        return None
    ops = [scale_op(a, b, v1, v2, vocab) for a, b in zip(g1.ops, g2.ops)]
    counts = {k: affine(getattr(g1, k), getattr(g2, k), v1, v2, vocab)
              for k in ("param_count", "param_bytes", "activation_bytes")}
    if None in ops or None in counts.values():
        return None
    meta = {**g1.meta, "scaled_from_vocabs": [v1, v2]}
    meta.pop("kept_activations", None)           # per-tensor tallies are not rescaled; the total is
    return dataclasses.replace(g1, ops=tuple(ops), meta=meta, **counts)  # type: ignore[arg-type]


def extraction_settings(settings: Settings, micro_batch: int) -> Settings:
    """One card's compile of one micro-batch: parallel layout and fused attention are the model's inputs (the
    block is compiled with the plain attention core, which flash.py replaces by the fused kernels)."""
    return settings.replace(devices=1, tensor_parallel=1, pipeline_stages=1, micro_batches=1,
                            sequence_parallel=False, optimizer_shard=False, parallel_mode="data",
                            flash_attention=False, grad_accum=1, batch_size=micro_batch)


def vocab_shard(vocab: int, tensor_parallel: int) -> int:
    """Megatron's vocabulary-parallel split, padded up when it does not divide."""
    return -(-vocab // tensor_parallel)


def at_batch(compile_at: Callable[[int], OpGraph], micro_batch: int) -> OpGraph:
    """The part at `micro_batch`: above the reference batches scaled exactly from two small compiles
    (hardware/model/scaling.py), else compiled at that size."""
    if micro_batch > REFERENCE_BATCHES[-1]:
        scaled = scale_batch(*(compile_at(b) for b in REFERENCE_BATCHES), micro_batch)
        if scaled is not None:
            return scaled
    return compile_at(micro_batch)


def width_references(preset: Any, tensor_parallel: int) -> tuple[int, int] | None:
    """The two ranks a block at `tensor_parallel` is scaled from, or None to compile it as it is: only a
    rank wider than both, and only where both split the heads, kv heads and FFN evenly into at least 2 each
    (an axis of 1 may be squeezed away by the compiler, as a batch of 1 can be)."""
    narrow, wide = REFERENCE_TENSOR_PARALLEL
    if tensor_parallel >= wide or narrow % tensor_parallel:
        return None
    if any(getattr(preset, name) % narrow or getattr(preset, name) // narrow < 2
           for name in ("heads", "kv_heads", "ff_dim")):
        return None
    return REFERENCE_TENSOR_PARALLEL


def scale_width(narrow: OpGraph, wide: OpGraph, x1: int, x2: int, x: int) -> OpGraph | None:
    """A block at a rank `x` times as wide as `narrow`'s shard, from the blocks at widths x1 < x2 (in units
    of the narrow shard). Every per-shard dimension (heads, kv heads, FFN) is proportional to the width,
    and the hidden size, sequence and batch are constant, so each op's tensors, FLOPs and bytes and the
    block's weights, states and kept activations are affine in it, exactly as `scaling.scale_batch` finds
    them affine in the batch; None (compile it) where the two blocks do not align or a term is not."""
    constant = ("workload", "preset", "batch_size", "grad_accum")
    if len(narrow.ops) != len(wide.ops) or any(getattr(narrow, k) != getattr(wide, k) for k in constant):
        return None
    ops = [scale_op(a, b, x1, x2, x) for a, b in zip(narrow.ops, wide.ops)]
    counts = {k: affine(getattr(narrow, k), getattr(wide, k), x1, x2, x)
              for k in ("param_count", "param_bytes", "activation_bytes")}
    state = affine(int(narrow.meta.get("state_bytes", 0)), int(wide.meta.get("state_bytes", 0)), x1, x2, x)
    kept = scale_kept(narrow.meta, wide.meta, x1, x2, x)
    if None in ops or None in counts.values() or state is None or kept is None:
        return None
    meta = recount({**scale_casts(narrow.meta, wide.meta, x1, x2, x), "scaled_from_widths": [x1, x2],
                    "state_bytes": state, "kept_activations": kept}, ops)  # type: ignore[arg-type]
    return dataclasses.replace(narrow, ops=tuple(ops), meta=meta, **counts)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CellParts:
    """The compiled parts one cell's graphs are composed of, each keyed as the cache keys it."""
    workload: str
    preset_name: str
    preset: Any
    overrides: Mapping[str, Any]
    settings: Settings
    micro_batch: int

    def block_job(self, rank_tp: int, b: int) -> GraphCompile:
        return part_compile(self.workload, self.preset_name, self.overrides,
                            extraction_settings(self.settings, b), "block", rank_tp, b)

    def ends_job(self, vocab: int, b: int) -> GraphCompile:   # no block to recompute in the ends: one compile for every recompute
        return part_compile(self.workload, self.preset_name, self.overrides,
                            extraction_settings(self.settings, b).replace(recompute="none"), "ends", 1, b, vocab)

    def planned(self) -> list[GraphCompile]:
        """The compiles the composition reads, known before any is made (a fallback compile, where two
        references do not scale, is made when it is found to be needed)."""
        widths = width_references(self.preset, self.settings.tensor_parallel) or (self.settings.tensor_parallel,)
        batches = compile_batches(self.micro_batch)
        return ([self.block_job(t, b) for t in widths for b in batches]
                + [self.ends_job(v, b) for v in REFERENCE_VOCABS for b in batches])


def llm_graphs(parts: CellParts) -> LlmGraphs:
    planned = parts.planned()
    # With the planned parts' keys, the layout and the vocabulary the composition is determined (its
    # fallbacks' keys are made of the same inputs).
    memo = (str(cache_dir(CACHE_KIND)), parts.settings.tensor_parallel, parts.micro_batch,
            parts.preset.vocab_size, *(job.key for job in planned))
    if memo not in _COMPOSED:
        compile_missing_graphs(planned)       # a cell's cold parts are independent: batched into the children first
        _COMPOSED[memo] = composed_graphs(parts)
    return _COMPOSED[memo]


def composed_graphs(parts: CellParts) -> LlmGraphs:
    """The block and ends at the cell's rank, micro-batch and vocabulary shard, from the cached parts."""
    tp, micro_batch, preset = parts.settings.tensor_parallel, parts.micro_batch, parts.preset
    v1, v2 = REFERENCE_VOCABS
    widths = width_references(preset, tp)

    def block(b: int) -> OpGraph:
        if widths is not None:
            narrow_tp, wide_tp = widths
            scaled = scale_width(compiled_graph(parts.block_job(narrow_tp, b)),
                                 compiled_graph(parts.block_job(wide_tp, b)), 1, narrow_tp // wide_tp, narrow_tp // tp)
            if scaled is not None:
                return scaled
        return compiled_graph(parts.block_job(tp, b))

    def ends(vocab: int) -> OpGraph:
        return at_batch(lambda b: compiled_graph(parts.ends_job(vocab, b)), micro_batch)

    small, large = ends(v1), ends(v2)
    shard = vocab_shard(preset.vocab_size, tp)
    scaled = scale_vocab(small, large, v1, v2, shard) or ends(shard)
    return LlmGraphs(block=at_batch(block, micro_batch), ends=scaled,
                     params_per_token=(large.param_count - small.param_count) // (v2 - v1))


def part_ops(graph: OpGraph, settings: Settings, profile: HardwareProfile, fused_attention: bool = False
             ) -> tuple[Op, ...]:
    """The ops of `graph` lowered for the profile's chip; with `fused_attention` its attention core first
    becomes FlashAttentionScore + FlashAttentionScoreGrad (hardware/model/llm/flash.py)."""
    if fused_attention:
        graph = dataclasses.replace(graph, ops=fused_attention_ops(graph.ops, settings.recompute))
    return lower(graph, settings, profile).ops


def part_kernels(graph: OpGraph, settings: Settings, profile: HardwareProfile, fused_attention: bool = False
                 ) -> list[Kernel]:
    """The kernels of `part_ops`."""
    return kernels(part_ops(graph, settings, profile, fused_attention), profile)


def pass_cost(ks: list[Kernel]) -> PassCost:
    """Device seconds by phase of a part's kernels."""
    phases = phase_seconds(ks)
    return PassCost(forward_s=phases["forward"], backward_s=phases["backward"], recompute_s=phases["recompute"],
                    optimizer_s=phases["optimizer"])


@dataclass(frozen=True)
class LlmCosts:
    block: PassCost
    first: PassCost       # embedding: its update only (its gather's time is in `last`, see below)
    last: PassCost        # the ends' forward/backward (the vocabulary head dominates them)
    params: StageParams
    estimates: tuple[str, ...] = ()      # the profile's estimate constants these kernels read


def llm_costs(graphs: LlmGraphs, settings: Settings, profile: HardwareProfile, vocab_shard: int, tied: bool,
              total_params: int) -> LlmCosts:
    """Block and ends costs. The ends are not split by scope: their compute goes on the last stage (the
    head and loss dominate it) and only the token table's update on the first. A tied table (GPT-3) is
    counted on the first stage."""
    block_kernels = part_kernels(graphs.block, settings, profile, fused_attention=settings.flash_attention)
    ends_kernels = part_kernels(graphs.ends, settings, profile)
    block, ends = pass_cost(block_kernels), pass_cost(ends_kernels)
    # The composition costs no host side (its refusals keep the data pipeline at its defaults) and no launches
    # (a sunk graph's device time): neither's estimates are read.
    estimates = tuple(e["key"] for e in estimates_used([*block_kernels, *ends_kernels], settings, profile,
                                                       data_s=0.0, transfer_s=0.0) if not e["key"].startswith("launch."))
    end_params = graphs.ends.param_count
    table = graphs.params_per_token * vocab_shard // (1 if tied else 2)
    first_params = min(table, end_params)
    share = first_params / end_params if end_params else 0.0
    first = PassCost(0.0, 0.0, 0.0, ends.optimizer_s * share)
    last = dataclasses.replace(ends, optimizer_s=ends.optimizer_s * (1 - share))
    return LlmCosts(block=block, first=first, last=last,
                    params=StageParams(layer=graphs.block.param_count, first=first_params,
                                       last=end_params - first_params, total=total_params),
                    estimates=estimates)
