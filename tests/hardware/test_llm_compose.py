"""The LLM step composition: 1F1B bubble, TP/DP collectives on the 910B topology, breakdown bookkeeping."""

import pytest

from hardware.model.llm import comm
from hardware.model.llm.compose import PassCost, compose, tp_seconds_per_block
from hardware.model.llm.memory import StageParams
from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.profile import load_profile

SHAPE = DecoderShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000, seq=4096)
PARAMS = StageParams(layer=202_383_360, first=131_072_000, last=131_076_096, total=6_738_415_616)
BLOCK = PassCost(forward_s=0.004, backward_s=0.008, optimizer_s=0.001)
ENDS = PassCost(forward_s=0.002, backward_s=0.004)


@pytest.fixture(scope="module")
def profile():
    return load_profile("ascend910b")


def step(profile, **layout):
    return compose(SHAPE, Parallel(**layout), BLOCK, ENDS, ENDS, PARAMS, profile)


def test_breakdown_adds_up_and_bubble_follows_narayanan(profile):
    for m in (4, 8, 32):
        s = step(profile, tp=2, pp=4, micro_batches=m)
        assert sum(s.breakdown.values()) == pytest.approx(s.step_time_s)
        assert s.bubble_fraction == pytest.approx(3 / (m + 3))
        t = s.detail["micro_batch_stage_s"]
        assert s.breakdown["pp_bubble"] == pytest.approx(3 * t)
        assert s.breakdown["compute"] + s.breakdown["tp_comm"] + s.breakdown["pp_send"] == pytest.approx(m * t)
    assert step(profile, pp=4, micro_batches=32).tokens_per_s_per_device > \
        step(profile, pp=4, micro_batches=4).tokens_per_s_per_device


def test_tensor_parallel_collectives(profile):
    volume = 2 * 1 * 4096 * 4096
    one = comm.allreduce(volume, comm.Group(8, 1), profile)
    assert tp_seconds_per_block(SHAPE, Parallel(tp=8), profile) == pytest.approx(4 * one)
    assert tp_seconds_per_block(SHAPE, Parallel(tp=8, recompute="full"), profile) == pytest.approx(6 * one)
    # sequence parallel: reduce-scatter + all-gather move the all-reduce's bytes
    assert tp_seconds_per_block(SHAPE, Parallel(tp=8, sequence_parallel=True), profile) == pytest.approx(4 * one)
    assert step(profile, tp=1, dp=8).breakdown["tp_comm"] == 0.0


def test_groups_follow_the_server_boundary(profile):
    hccs, roce = profile.comm.levels
    assert comm.group_levels(comm.Group(8, 1), profile)[0].name == "hccs"
    assert [lv.name for lv in comm.group_levels(comm.Group(8, 8), profile)] == ["roce"]
    inner, outer = comm.group_levels(comm.Group(16, 4), profile)
    assert (inner.name, inner.size, outer.name) == ("hccs", 2, "roce")
    # the same bytes across servers take longer than inside one
    assert comm.allreduce(2**26, comm.Group(8, 8), profile) > comm.allreduce(2**26, comm.Group(8, 1), profile)
    assert comm.stage_link(Parallel(tp=4, pp=2), profile).name == "hccs"
    assert comm.stage_link(Parallel(tp=8, pp=2), profile).name == "roce"


def test_optimizer_shard_divides_the_update_and_reshapes_dp_traffic(profile):
    plain = step(profile, tp=1, dp=8)
    shard = step(profile, tp=1, dp=8, optimizer_shard=True)
    assert shard.breakdown["optimizer"] == pytest.approx(plain.breakdown["optimizer"] / 8)
    assert shard.detail["dp_comm_total_s"] == pytest.approx(plain.detail["dp_comm_total_s"], rel=1e-9)
    assert shard.memory.peak < plain.memory.peak


def test_exposed_dp_comm_grows_when_backward_cannot_hide_it(profile):
    fast = compose(SHAPE, Parallel(dp=8), PassCost(1e-4, 2e-4), ENDS, ENDS, PARAMS, profile)
    slow = step(profile, dp=8)
    assert fast.breakdown["dp_comm"] > slow.breakdown["dp_comm"] > 0


def test_mfu_counts_model_flops_only(profile):
    s = step(profile, tp=8)
    assert s.model_flops_per_token == 6 * PARAMS.total + 12 * 32 * 4096 * 4096
    assert s.mfu(353.9) == pytest.approx(s.tokens_per_s_per_device * s.model_flops_per_token / 353.9e12)
