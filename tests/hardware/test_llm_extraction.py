"""The LLM ends at any vocabulary from two small extractions, and block costs from depth differences."""

from __future__ import annotations

import pytest

from hardware.model.graph import direct_graph
from hardware.model.llm.extraction import LlmGraphs, llm_costs, part_kernels, pass_cost, scale_vocab
from hardware.model.profile import load_profile
from msbench.settings import Settings

SETTINGS = Settings(mode="graph", batch_size=2, optimizer="adamw")


def one_block(vocab: int, layers: int = 1):
    return direct_graph("gpt2-small", "tiny", {"layers": layers, "vocab_size": vocab}, SETTINGS)


@pytest.mark.slow
def test_vocabulary_scaling_matches_a_direct_extraction():
    scaled = scale_vocab(one_block(256), one_block(512), 256, 512, 384)
    direct = one_block(384)
    assert scaled is not None
    assert [(o.type, o.phase, o.inputs, o.outputs, o.flops, o.bytes) for o in scaled.ops] == \
        [(o.type, o.phase, o.inputs, o.outputs, o.flops, o.bytes) for o in direct.ops]
    assert (scaled.param_count, scaled.activation_bytes) == (direct.param_count, direct.activation_bytes)


@pytest.mark.slow
def test_ends_costs_split_between_the_first_and_last_stage():
    profile = load_profile("ascend910b")
    small, large = one_block(256), one_block(512)
    ends = scale_vocab(small, large, 256, 512, 1024)
    per_token = (large.param_count - small.param_count) // 256
    graphs = LlmGraphs(block=small, ends=ends, params_per_token=per_token)
    costs = llm_costs(graphs, SETTINGS, profile, vocab_shard=1024, tied=True, total_params=ends.param_count)
    assert per_token == 64                                       # GPT-2 tiny ties its table: d_model per entry
    assert costs.params.first == 1024 * 64 and costs.params.last == ends.param_count - 1024 * 64
    assert costs.block == pass_cost(part_kernels(small, SETTINGS, profile))
    whole = pass_cost(part_kernels(ends, SETTINGS, profile))
    assert (costs.first.forward_s, costs.last.forward_s) == (0.0, whole.forward_s)
    assert costs.first.optimizer_s + costs.last.optimizer_s == pytest.approx(whole.optimizer_s)
    assert costs.first.optimizer_s > 0


def comparable(graph):
    """Everything of a block graph that a prediction reads (not its cache key or how it was made)."""
    meta = {k: v for k, v in graph.meta.items() if not k.startswith("scaled_from")}
    return ([(o.type, o.scope, o.phase, o.unit, o.fusion_group, o.inputs, o.outputs, o.flops, o.bytes)
             for o in graph.ops], graph.param_count, graph.param_bytes, graph.activation_bytes, meta)


@pytest.mark.slow
def test_a_wide_rank_is_scaled_exactly_from_the_reference_ranks():
    """Grouped-query attention (2 query heads per kv head) with selective recompute and AMP: the block at
    tensor_parallel 2 and 1, scaled from the rank shapes at 8 and 4, equals the block compiled at 2 and 1."""
    from functools import partial

    from hardware.model.graph import compile_concurrently
    from hardware.model.llm.extraction import REFERENCE_TENSOR_PARALLEL, extraction_settings, scale_width
    from hardware.model.llm.parts import part_graph

    overrides = {"heads": 32, "kv_heads": 16, "ff_dim": 224}
    settings = extraction_settings(Settings(mode="graph", amp_level="O2", optimizer="adamw",
                                            recompute="selective"), 2)
    block = partial(part_graph, "llama2-70b", "tiny", overrides, settings, "block", micro_batch=2)
    compile_concurrently([partial(block, tensor_parallel=tp) for tp in (8, 4, 2, 1)])
    narrow, wide = (block(tensor_parallel=tp) for tp in REFERENCE_TENSOR_PARALLEL)
    for tp in (2, 1):
        scaled = scale_width(narrow, wide, 1, 2, 8 // tp)
        assert scaled is not None and scaled.meta["scaled_from_widths"] == [1, 2]
        assert comparable(scaled) == comparable(block(tensor_parallel=tp))


def test_only_ranks_wider_than_both_references_that_split_evenly_are_scaled():
    from hardware.model.llm.extraction import width_references
    from workloads.registry import get_workload

    seven, seventy = (get_workload(w).preset("full") for w in ("llama2-7b", "llama2-70b"))
    assert width_references(seven, 1) == width_references(seven, 2) == (8, 4)
    assert width_references(seven, 4) is None and width_references(seven, 8) is None
    assert width_references(seventy, 1) is None          # 8 kv heads: one per rank at tensor_parallel 8
    assert width_references(seven, 3) is None             # 3 does not divide the narrow reference's 8



@pytest.mark.slow
def test_parts_compiled_in_one_child_equal_parts_compiled_alone_and_a_failed_one_is_left_uncached(
        tmp_path, monkeypatch):
    """`compile_missing_graphs` compiles a cell's missing parts a few to a child (MindSpore imported once per
    child). Each part equals the part compiled in a child of its own; a request that fails in its child
    (3 heads do not divide the width) is not cached, so `compiled_graph` compiles it alone and reports it."""
    from hardware.model.graph import ExtractionError, compile_missing_graphs, compiled_graph
    from hardware.model.llm.extraction import extraction_settings
    from hardware.model.graph import CACHE_KIND
    from hardware.model.llm.parts import part_compile
    from msbench.cache import cache_has

    settings = extraction_settings(Settings(mode="graph", amp_level="O2", optimizer="adamw"), 2)
    jobs = [part_compile("llama2-70b", "tiny", {}, settings, "block", 2, 2),
            part_compile("llama2-70b", "tiny", {}, settings.replace(recompute="none"), "ends", 1, 2, 256)]
    bad = part_compile("llama2-70b", "tiny", {"heads": 3}, settings, "block", 1, 2)
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path / "batched"))
    compile_missing_graphs([*jobs, bad])
    assert [cache_has(CACHE_KIND, job.key) for job in (*jobs, bad)] == [True, True, False]
    batched = [compiled_graph(job) for job in jobs]
    with pytest.raises(ExtractionError, match="heads=3 is not allowed"):
        compiled_graph(bad)
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path / "alone"))
    assert [comparable(g) for g in batched] == [comparable(compiled_graph(job)) for job in jobs]
