"""The Ascend auto-parallel plan as data (no NPU): the context MindSpore is given, the shard strategies and
pipeline stages put on the real LLM network, and the gradient reduction the training step picks."""

from __future__ import annotations

import pytest

from workloads.parallel_plan import MatmulShard, plan_parallel
from msbench.settings import make_settings

HYBRID = dict(devices=16, parallel_mode="semi_auto", tensor_parallel=4, pipeline_stages=2, micro_batches=4,
              optimizer_shard=True)


def test_data_parallel_is_the_plain_context_and_annotates_nothing():
    plan = plan_parallel(make_settings({"devices": 8}))
    assert dict(plan.context) == {"parallel_mode": "data_parallel", "device_num": 8, "gradients_mean": True}
    assert not plan.sharded and plan.data_parallel == 8
    assert (plan.loaded_batch(4), plan.data_shard(3, 8)) == (4, (3, 8))


def test_semi_auto_hybrid_plan():
    plan = plan_parallel(make_settings(HYBRID))
    assert dict(plan.context) == {"parallel_mode": "semi_auto_parallel", "device_num": 16, "gradients_mean": True,
                                  "dataset_strategy": "full_batch", "pipeline_stages": 2,
                                  "enable_parallel_optimizer": True}
    assert (plan.data_parallel, plan.tensor_parallel, plan.micro_batches) == (2, 4, 4)
    assert plan.column == MatmulShard(((2, 1), (4, 1)))             # Q/K/V, gate/up: split the outputs
    assert plan.row == MatmulShard(((2, 4), (1, 4)))                # O, down: split the inputs, all-reduce
    assert (plan.loaded_batch(4), plan.data_shard(3, 16)) == (8, (0, 1))   # every rank loads the global batch


def test_sequence_parallel_reduce_scatters_the_row_parallel_output():
    plan = plan_parallel(make_settings({**HYBRID, "sequence_parallel": True}))
    assert plan.row.out_strategy == ((8, 1),)


def test_auto_mode_searches_by_sharding_propagation():
    plan = plan_parallel(make_settings({"devices": 8, "parallel_mode": "auto", "tensor_parallel": 2}))
    assert dict(plan.context)["parallel_mode"] == "auto_parallel"
    assert dict(plan.context)["search_mode"] == "sharding_propagation"
    assert "search_mode" not in dict(plan_parallel(make_settings(HYBRID)).context)


@pytest.mark.parametrize("layers,stages,expected", [
    (4, 2, [0, 0, 1, 1]), (10, 4, [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]), (4, 4, [0, 1, 2, 3]),
])
def test_layers_go_to_consecutive_stages(layers, stages, expected):
    plan = plan_parallel(make_settings({"devices": 8, "parallel_mode": "semi_auto", "pipeline_stages": stages,
                                        "micro_batches": stages}), device_num=stages)
    assert [plan.stage_of(i, layers) for i in range(layers)] == expected


def test_the_context_is_accepted_by_mindspore(scratch):
    import mindspore as ms

    from workloads.parallel_plan import apply_context

    apply_context(plan_parallel(make_settings({**HYBRID, "parallel_mode": "auto"})))
    try:
        assert ms.get_auto_parallel_context("parallel_mode") == "auto_parallel"
        assert ms.get_auto_parallel_context("pipeline_stages") == 2
        assert ms.get_auto_parallel_context("enable_parallel_optimizer") is True
        assert ms.get_auto_parallel_context("full_batch") is True
    finally:
        ms.reset_auto_parallel_context()


def test_the_real_llm_network_carries_the_plan(scratch):
    from workloads.registry import get_workload

    wl = get_workload("llama2-70b")
    settings = make_settings({**HYBRID, "tensor_parallel": 2, "sequence_parallel": True})
    net = wl.build_parallel_network(wl.preset("tiny"), settings)
    dp = 4
    for stage, block in enumerate(net.blocks):       # tiny: 2 layers over 2 stages
        assert block.pipeline_stage == stage
        assert [d.matmul.in_strategy for d in block.column_layers()] == [((dp, 1), (2, 1))] * 5
        assert [d.matmul.out_strategy for d in block.row_layers()] == [((dp * 2, 1),)] * 2
    assert (net.token.pipeline_stage, net.head.pipeline_stage, net.final_norm.pipeline_stage) == (0, 1, 1)
    plain = wl.build_parallel_network(wl.preset("tiny"), make_settings({"devices": 8}))
    assert not hasattr(plain.blocks[0].attention.query.matmul, "in_strategy")


def test_flash_attention_builds_the_fused_kernel_instead_of_the_core(scratch):
    from workloads.registry import get_workload

    wl = get_workload("llama2-7b")
    fused = wl.build_parallel_network(wl.preset("tiny"), make_settings({"flash_attention": True, "amp_level": "O2"}))
    plain = wl.build_parallel_network(wl.preset("tiny"), make_settings({}))
    assert fused.blocks[0].attention.flash and not hasattr(fused.blocks[0].attention, "core")
    assert hasattr(plain.blocks[0].attention, "core")


def test_the_step_reduces_gradients_as_the_mode_requires(scratch):
    from mindspore import ParameterTuple, nn

    from workloads.train_step import gradient_reducer

    weights = ParameterTuple(nn.Dense(2, 2).trainable_params())
    assert gradient_reducer(make_settings({}), weights) is None
    assert isinstance(gradient_reducer(make_settings(HYBRID), weights), nn.PipelineGradReducer)
    assert gradient_reducer(make_settings({"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 8}),
                            weights) is None      # the parallel compiler inserts the reductions itself
