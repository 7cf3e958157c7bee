"""One memory-estimate type for the graph, inference and LLM paths, each keeping the component set its
records always had (peak_memory_detail)."""

from __future__ import annotations

import pytest

from hardware.model.inference import forward_memory
from hardware.model.llm.memory import StageParams, llm_memory
from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.memory import estimate_memory
from hardware.model.memory_estimate import MemoryEstimate
from hardware.model.profile import load_profile
from model_graphs import graph, matmul  # noqa: E402
from msbench.settings import Settings

B = load_profile("ascend910b")
LLAMA = DecoderShape(layers=4, hidden=512, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq=128)
PARAMS = StageParams(layer=10_000, first=5_000, last=5_000, total=50_000)

GRAPH_COMPONENTS = {"params", "optimizer_states", "accumulation", "activations", "grads", "workspace",
                    "data_queue", "fragmentation"}
LLM_COMPONENTS = {"params", "grads", "optimizer_states", "activations", "transient", "workspace", "fragmentation"}


def test_every_path_returns_the_one_type_with_its_record_components():
    g = graph([matmul(8, 8, 8)], params=1_000, activations=5_000)
    train = estimate_memory(g, Settings(grad_accum=2), B)
    infer = forward_memory(g, B)
    llm = llm_memory(LLAMA, Parallel(pp=2, micro_batches=2, dp=2, optimizer_shard=True), PARAMS, B)
    for m in (train, infer, llm):
        assert isinstance(m, MemoryEstimate)
        assert m.peak == sum(m.to_dict().values())
        assert m.oom == (m.peak > m.capacity)
    assert set(train.to_dict()) == set(infer.to_dict()) == GRAPH_COMPONENTS
    assert set(llm.to_dict()) == LLM_COMPONENTS and llm.stage in ("first", "last")
    assert train.accumulation == g.param_bytes and llm.transient > 0


def test_a_component_left_out_is_not_a_zero():
    m = MemoryEstimate(params=1, grads=2, optimizer_states=3, activations=4, workspace=5, fragmentation=6,
                       capacity=100, data_queue=0)
    assert m.to_dict() == {"params": 1, "grads": 2, "optimizer_states": 3, "activations": 4, "workspace": 5,
                           "fragmentation": 6, "data_queue": 0}
    assert m.peak == 21 and not m.oom


def test_a_bad_stage_names_the_field():
    with pytest.raises(ValueError, match=r"MemoryEstimate.stage: 'middle' is not one of only, first, last"):
        MemoryEstimate(params=0, grads=0, optimizer_states=0, activations=0, workspace=0, fragmentation=0,
                       capacity=0, stage="middle")
