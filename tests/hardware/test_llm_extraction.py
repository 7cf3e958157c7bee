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
