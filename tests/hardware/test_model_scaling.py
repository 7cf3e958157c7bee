"""Graphs at any batch from two small extractions, checked against direct extractions."""

from __future__ import annotations

import dataclasses

import pytest

from hardware.model.scaling import REFERENCE_BATCHES, affine, scale_batch
from model_graphs import elementwise, graph, mlp_step
from msbench.settings import Settings
from workloads.registry import WORKLOADS


def test_affine_is_exact_in_integers_or_refuses():
    assert affine(10, 18, 2, 4, 32) == 10 + 4 * 30
    assert affine(7, 7, 2, 4, 1000) == 7
    assert affine(1, 2, 2, 4, 3) is None                  # 1.5 is not an op count


@pytest.mark.parametrize("batch", [8, 96, 250])
def test_hand_built_step_scales_to_what_building_it_at_that_batch_gives(batch):
    small = [mlp_step(b) for b in REFERENCE_BATCHES]
    scaled = scale_batch(*small, batch)
    direct = mlp_step(batch)
    assert scaled is not None and scaled.batch_size == batch
    assert scaled.ops == direct.ops and scaled.activation_bytes == direct.activation_bytes
    assert scaled.meta["scaled_from_batches"] == list(REFERENCE_BATCHES)


def test_graphs_that_do_not_align_are_not_scaled():
    a, b = mlp_step(2), mlp_step(4)
    assert scale_batch(a, dataclasses.replace(b, ops=b.ops[:-1]), 16) is None           # another kernel list
    odd = graph([elementwise((3,))], batch=4)                                           # neither fixed nor ∝ batch
    assert scale_batch(graph([elementwise((2,))], batch=2), odd, 16) is None
    assert scale_batch(b, a, 16) is None                                                # b1 < b2 required


@pytest.mark.slow
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_scaled_extraction_matches_a_direct_one(workload):
    """Tiny presets: batch 8 scaled from the reference batches against batch 8 compiled directly."""
    from hardware.model.graph import direct_graph, extract_graph

    settings = Settings(batch_size=8)
    scaled = extract_graph(workload, "tiny", {}, settings)
    direct = direct_graph(workload, "tiny", {}, settings)
    assert scaled.meta.get("scaled_from_batches") == list(REFERENCE_BATCHES), "the scaled path was not taken"
    assert [(o.type, o.phase, o.scope) for o in scaled.ops] == [(o.type, o.phase, o.scope) for o in direct.ops]
    assert [(o.inputs, o.outputs) for o in scaled.ops] == [(o.inputs, o.outputs) for o in direct.ops]
    for field in ("flops", "bytes"):
        assert sum(getattr(o, field) for o in scaled.ops) == pytest.approx(
            sum(getattr(o, field) for o in direct.ops), rel=0.01)
    assert scaled.activation_bytes == pytest.approx(direct.activation_bytes, rel=0.01)
    assert (scaled.param_count, scaled.param_bytes) == (direct.param_count, direct.param_bytes)
