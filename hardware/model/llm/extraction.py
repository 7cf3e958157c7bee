"""One tensor-parallel rank's decoder block and the model's two ends, from three small real extractions.

The cost of extraction does not grow with the model: MindSpore compiles the workload's own network
(its `build_network`, at the per-shard sizes the workload gives for `tensor_parallel`) with one and
with two blocks at a small reference vocabulary, and with one block at a second vocabulary. The
block is the difference of the first two (its ops, parameters and kept activations are exact
repeats: hardware/model/scaling.py); the ends (embedding, final norm, head, loss) are the one-block
graph minus the block, at the model's vocabulary by scaling every vocabulary-sized dimension along
the two reference vocabularies, exactly as `scaling.scale_batch` scales the batch. Each compile is
cached through msbench/cache.py by `hardware.model.graph`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from hardware.model.compute import kernels
from hardware.model.graph import extract_graph
from hardware.model.llm.compose import PassCost
from hardware.model.llm.memory import StageParams
from hardware.model.lowering import lower
from hardware.model.opgraph import OpGraph
from hardware.model.predict import phase_seconds
from hardware.model.profile import HardwareProfile
from hardware.model.scaling import affine, scale_op
from msbench.errors import ConfigError
from msbench.settings import Settings

REFERENCE_VOCABS = (256, 512)     # small, and apart from every other dimension of the tiny and full presets


@dataclass(frozen=True)
class LlmGraphs:
    one: OpGraph          # one block, ends at the model's vocabulary
    two: OpGraph          # two blocks at REFERENCE_VOCABS[0]
    one_small: OpGraph    # one block at REFERENCE_VOCABS[0]
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


def shard_overrides(preset: Any, tensor_parallel: int) -> dict[str, int]:
    """The preset fields that make the workload build one tensor-parallel rank's network."""
    if tensor_parallel == 1:
        return {}
    if not hasattr(preset, "tensor_shards"):
        raise ConfigError("tensor_parallel", tensor_parallel, "1 on the device model for this workload",
                          rule="its preset has no `tensor_shards` field to build one rank's shard")
    return {"tensor_shards": tensor_parallel}


def extraction_settings(settings: Settings, micro_batch: int) -> Settings:
    """One card's compile of one micro-batch: parallel layout and fused attention are the model's inputs."""
    return settings.replace(devices=1, tensor_parallel=1, pipeline_stages=1, micro_batches=1,
                            sequence_parallel=False, optimizer_shard=False, parallel_mode="data",
                            flash_attention=False, grad_accum=1, batch_size=micro_batch)


def llm_graphs(workload: str, preset_name: str, preset: Any, overrides: Mapping[str, Any],
               settings: Settings, micro_batch: int) -> LlmGraphs:
    base = {**overrides, **shard_overrides(preset, settings.tensor_parallel)}
    one_card = extraction_settings(settings, micro_batch)
    v1, v2 = REFERENCE_VOCABS

    def graph(layers: int, vocab: int) -> OpGraph:
        return extract_graph(workload, preset_name, {**base, "layers": layers, "vocab_size": vocab}, one_card)

    one_small, one_large, two = graph(1, v1), graph(1, v2), graph(2, v1)
    one = scale_vocab(one_small, one_large, v1, v2, preset.vocab_size)
    if one is None:
        one = graph(1, preset.vocab_size)
    per_token = affine(one_small.param_count, one_large.param_count, v1, v2, v1 + 1)
    return LlmGraphs(one=one, two=two, one_small=one_small,
                     params_per_token=(per_token or one_small.param_count) - one_small.param_count)


def pass_cost(graph: OpGraph, settings: Settings, profile: HardwareProfile) -> PassCost:
    """Device seconds by phase of `graph` lowered for the profile's chip."""
    phases = phase_seconds(kernels(lower(graph, settings, profile).ops, profile))
    return PassCost(forward_s=phases["forward"], backward_s=phases["backward"], recompute_s=phases["recompute"],
                    optimizer_s=phases["optimizer"])


def minus(a: PassCost, b: PassCost) -> PassCost:
    return PassCost(*(max(x - y, 0.0) for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b))))


@dataclass(frozen=True)
class LlmCosts:
    block: PassCost
    first: PassCost       # embedding: its update only (its gather's time is in `last`, see below)
    last: PassCost        # the ends' forward/backward (the vocabulary head dominates them)
    params: StageParams


def llm_costs(graphs: LlmGraphs, settings: Settings, profile: HardwareProfile, vocab: int, tied: bool,
              total_params: int) -> LlmCosts:
    """Block and ends costs; the ends are not split by scope, so their compute is put on the last stage
    (head and loss) and only the optimizer update of the token table on the first. A tied table (GPT-3)
    is counted on the first stage only."""
    small, two, one = (pass_cost(g, settings, profile) for g in (graphs.one_small, graphs.two, graphs.one))
    block = minus(two, small)
    ends = minus(one, block)
    layer = graphs.two.param_count - graphs.one_small.param_count
    end_params = graphs.one.param_count - layer
    table = graphs.params_per_token * vocab // (1 if tied else 2)
    first_params = min(table, end_params)
    share = first_params / end_params if end_params else 0.0
    first = PassCost(0.0, 0.0, 0.0, ends.optimizer_s * share)
    last = dataclasses.replace(ends, optimizer_s=ends.optimizer_s * (1 - share))
    return LlmCosts(block=block, first=first, last=last,
                    params=StageParams(layer=layer, first=first_params, last=end_params - first_params,
                                       total=total_params))
