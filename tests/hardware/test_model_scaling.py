"""Graphs at any batch from two small extractions, checked against direct extractions."""

from __future__ import annotations

import dataclasses

import pytest

from collections import Counter

from hardware.model.scaling import REFERENCE_BATCHES, REFERENCE_DEPTHS, affine, scale_batch, scale_depth
from model_graphs import elementwise, graph, mlp_step
from msbench.settings import Settings
from workloads.registry import WORKLOADS, get_workload

# The four LLMs (and `llm`, any shape over Llama 2 7B's presets) share one network class: llama2-70b (grouped-query heads) stands for the Llama 2 presets, and
# gpt3-175b's tiny preset is the same decoder-only stack with LayerNorm/GELU, covered by gpt2-small's class.
# yolov8s, bert-large and transformer-large are yolov8n's, bert-base's and transformer-base's classes (only the
# name differs) at another preset width: scaling is a property of the network's code, tested once per class.
SAME_NETWORK_AS_ANOTHER = {"llama2-7b", "llama2-13b", "gpt3-175b", "llm", "yolov8s", "bert-large", "transformer-large"}
SCALED = sorted(set(WORKLOADS) - SAME_NETWORK_AS_ANOTHER)
STACKED = sorted(w for w in SCALED if get_workload(w).identical_blocks)


def kernels(g):
    """The kernel list as a multiset (depth scaling repeats a block's ops next to them, and MindSpore's
    scheduler may interleave blocks' backward and optimizer kernels differently)."""
    return Counter((o.type, o.phase, o.inputs, o.outputs) for o in g.ops)


def assert_same_costs(scaled, direct):
    for field in ("flops", "bytes"):
        assert sum(getattr(o, field) for o in scaled.ops) == pytest.approx(
            sum(getattr(o, field) for o in direct.ops), rel=0.01)
    assert scaled.activation_bytes == pytest.approx(direct.activation_bytes, rel=0.01)
    assert (scaled.param_count, scaled.param_bytes) == (direct.param_count, direct.param_bytes)
    assert scaled.meta["state_bytes"] == direct.meta["state_bytes"]


def test_scale_kept_counts_a_kind_new_at_two_blocks_from_zero():
    from hardware.model.scaling import scale_kept

    one = {"kept_activations": [["Add", 0, "Mul", 2, 64, 16]]}
    two = {"kept_activations": [["Add", 0, "Mul", 4, 128, 32], ["Add", 0, "LayerNorm", 1, 40, 10]]}
    assert scale_kept(one, two, 1, 2, 12) is None                              # the batch: kinds must match
    assert scale_kept(one, two, 1, 2, 12, new_kinds=True) == [["Add", 0, "Mul", 24, 768, 192],
                                                             ["Add", 0, "LayerNorm", 11, 440, 110]]
    assert scale_kept(two, one, 1, 2, 12, new_kinds=True) is None              # a kind lost is refused


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
# The long tier: yolov5s and gpt2-small (the batch scaling yolov8n's and transformer-base's cases check), and
# yolov8n (the same scaling rule resnet50's case checks on another network; the YOLO pair stays in make test-long)
@pytest.mark.parametrize("workload", [pytest.param(w, marks=pytest.mark.long)
                                      if w in ("yolov5s", "gpt2-small", "yolov8n") else w for w in SCALED])
def test_scaled_extraction_matches_a_direct_one(workload):
    """Tiny presets: batch 8 scaled from the reference batches against batch 8 compiled directly."""
    from hardware.model.graph import direct_graph, extract_graph

    settings = Settings(batch_size=8)
    scaled = extract_graph(workload, "tiny", {}, settings)
    direct = direct_graph(workload, "tiny", {}, settings)
    assert scaled.meta.get("scaled_from_batches") == list(REFERENCE_BATCHES), "the scaled path was not taken"
    assert [(o.type, o.phase, o.scope) for o in scaled.ops] == [(o.type, o.phase, o.scope) for o in direct.ops]
    assert [(o.inputs, o.outputs) for o in scaled.ops] == [(o.inputs, o.outputs) for o in direct.ops]
    assert_same_costs(scaled, direct)


def depth_overrides(workload: str, depth: int) -> dict:
    preset = get_workload(workload).preset("tiny")
    return {f: depth for f in get_workload(workload).identical_blocks if getattr(preset, f) > 0}


@pytest.mark.slow
# The long tier: every case. bert-base's stack is depth-scaled under AMP O2 with dynamic loss scaling in make test
# (test_depth_scaling_covers_ops_over_every_parameter: the same path plus the AddN that grows with the depth);
# gpt2-small is a stack of the blocks bert-base's (encoder) and llama2-70b's (decoder) cases check; llama2-70b
# itself: an LLM cell composes blocks, so the one decoder stack depth-scaled is gpt2-small's.
@pytest.mark.long
@pytest.mark.parametrize("workload", STACKED)
def test_depth_scaled_extraction_matches_a_direct_one(workload):
    """Tiny presets at batch 2: three blocks per stack extended from one and two, against three compiled."""
    from hardware.model.graph import direct_graph

    small = Settings(batch_size=REFERENCE_BATCHES[0])
    shallow = [direct_graph(workload, "tiny", depth_overrides(workload, d), small) for d in REFERENCE_DEPTHS]
    scaled = scale_depth(*shallow, 3)
    direct = direct_graph(workload, "tiny", depth_overrides(workload, 3), small)
    assert scaled is not None and scaled.meta["scaled_from_depths"] == list(REFERENCE_DEPTHS)
    assert kernels(scaled) == kernels(direct)
    assert_same_costs(scaled, direct)


@pytest.mark.slow
def test_depth_scaling_covers_ops_over_every_parameter():
    """Dynamic loss scaling sums one overflow flag per parameter in one AddN that grows with the depth:
    BERT-base's full size fell back to compiling its 12 layers for it (45-60 s each). The kinds of tensor
    full recompute keeps only between blocks do not show at the tiny preset:
    test_scale_kept_counts_a_kind_new_at_two_blocks_from_zero covers those."""
    from hardware.model.graph import direct_graph

    knobs = {"amp_level": "O2", "loss_scale": "dynamic"}
    small = Settings(batch_size=REFERENCE_BATCHES[0], **knobs)
    shallow = [direct_graph("bert-base", "tiny", depth_overrides("bert-base", d), small) for d in REFERENCE_DEPTHS]
    scaled = scale_depth(*shallow, 3)
    direct = direct_graph("bert-base", "tiny", depth_overrides("bert-base", 3), small)
    assert scaled is not None
    assert kernels(scaled) == kernels(direct)
    assert scaled.meta["kept_activations"] == direct.meta["kept_activations"]
    assert_same_costs(scaled, direct)


@pytest.mark.slow
def test_the_product_path_scales_batch_and_depth_together():
    from hardware.model.graph import direct_graph, extract_graph

    settings, overrides = Settings(batch_size=8), depth_overrides("bert-base", 3)
    scaled = extract_graph("bert-base", "tiny", overrides, settings)
    assert scaled.meta["scaled_from_batches"] == list(REFERENCE_BATCHES)
    assert scaled.meta["scaled_from_depths"] == list(REFERENCE_DEPTHS)
    direct = direct_graph("bert-base", "tiny", overrides, settings)
    assert kernels(scaled) == kernels(direct)
    assert_same_costs(scaled, direct)
