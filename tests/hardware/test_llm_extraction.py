"""The LLM ends at any vocabulary from two small extractions, and block costs from depth differences."""

from __future__ import annotations

import pytest

from hardware.model.graph import direct_graph
from hardware.model.llm.extraction import LlmGraphs, llm_costs, minus, pass_cost, scale_vocab
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
def test_block_and_ends_costs_split_the_one_block_graph():
    profile = load_profile("ascend910b")
    small, large, two = one_block(256), one_block(512), one_block(256, layers=2)
    one = scale_vocab(small, large, 256, 512, 1024)
    per_token = large.param_count - small.param_count
    graphs = LlmGraphs(one=one, two=two, one_small=small, params_per_token=per_token // 256)
    costs = llm_costs(graphs, SETTINGS, profile, vocab=1024, tied=True, total_params=one.param_count)
    block = minus(pass_cost(two, SETTINGS, profile), pass_cost(small, SETTINGS, profile))
    assert costs.block == block and block.forward_s > 0 and block.backward_s > block.forward_s * 0.5
    assert costs.params.layer == two.param_count - small.param_count
    assert costs.params.first == 1024 * 64                     # the tied token table: vocab x d_model
    whole = pass_cost(one, SETTINGS, profile)
    assert costs.last.forward_s == pytest.approx(whole.forward_s - block.forward_s)
    assert costs.first.optimizer_s + costs.last.optimizer_s == pytest.approx(whole.optimizer_s - block.optimizer_s)
