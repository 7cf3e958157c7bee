"""YOLO family: published sizes, box geometry and both assigners on hand-made boxes, tiny training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from msbench.errors import ConfigError
from msbench.settings import Settings
from workloads.registry import get_workload

# Ultralytics model tables at 640x640, 80 classes: parameters (M) and GFLOPs.
PUBLISHED = {"yolov5s": (7.2e6, 16.5), "yolov8n": (3.2e6, 8.7), "yolov8s": (11.2e6, 28.6)}
TOLERANCE = 0.03
TINY_MAP50 = 0.2               # the tiny presets must reach this mAP@0.5 (chance is 0)


def tensor(array, dtype=np.float32):
    from mindspore import Tensor

    return Tensor(np.asarray(array, dtype))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_full_network_has_the_published_parameter_count(name, scratch):
    from workloads.base import trainable_parameters

    wl = get_workload(name)
    assert trainable_parameters(wl.build_network(wl.preset("full"))) == pytest.approx(PUBLISHED[name][0], rel=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_full_network_has_the_published_gflops(name, scratch):
    from hardware.model.graph import forward_flops

    wl = get_workload(name)
    preset = wl.preset("full")
    image = wl.synthetic_batch(preset, 1)[0]
    assert image.shape == (1, 3, 640, 640)
    flops = forward_flops(wl.build_network(preset), [image])
    assert flops / 1e9 == pytest.approx(PUBLISHED[name][1], rel=TOLERANCE)


def hand_ciou(b1, b2):
    """CIoU written out from Zheng et al. (2020), eq. 9-11, for two xyxy boxes."""
    w1, h1, w2, h2 = b1[2] - b1[0], b1[3] - b1[1], b2[2] - b2[0], b2[3] - b2[1]
    inter = max(0, min(b1[2], b2[2]) - max(b1[0], b2[0])) * max(0, min(b1[3], b2[3]) - max(b1[1], b2[1]))
    iou = inter / (w1 * h1 + w2 * h2 - inter)
    diagonal2 = (max(b1[2], b2[2]) - min(b1[0], b2[0])) ** 2 + (max(b1[3], b2[3]) - min(b1[1], b2[1])) ** 2
    centre2 = ((b1[0] + b1[2]) / 2 - (b2[0] + b2[2]) / 2) ** 2 + ((b1[1] + b1[3]) / 2 - (b2[1] + b2[3]) / 2) ** 2
    v = 4 / math.pi**2 * (math.atan(w2 / h2) - math.atan(w1 / h1)) ** 2
    alpha = v / ((1 - iou) + v) if v else 0.0
    return iou - centre2 / diagonal2 - alpha * v


def test_ciou_matches_a_hand_computation(scratch):
    from workloads.yolo.boxes import bbox_ciou

    pairs = [((0, 0, 4, 2), (1, 1, 5, 4)), ((0, 0, 4, 2), (0, 0, 4, 2)), ((0, 0, 1, 1), (3, 3, 5, 6))]
    got = bbox_ciou(tensor([p[0] for p in pairs]), tensor([p[1] for p in pairs])).asnumpy()
    # first pair by hand: IoU 3/17, centres (2,1)-(3,2.5): rho^2 3.25, enclosing 5x4: c^2 41
    v = 4 / math.pi**2 * (math.atan(4 / 3) - math.atan(2)) ** 2
    assert got[0] == pytest.approx(3 / 17 - 3.25 / 41 - v * v / (1 - 3 / 17 + v), abs=1e-5)
    assert got == pytest.approx([hand_ciou(*p) for p in pairs], abs=1e-5)
    assert got[1] == pytest.approx(1.0, abs=1e-5) and got[2] < 0
    xywh = bbox_ciou(tensor([2, 1, 4, 2]), tensor([3, 2.5, 4, 3]), xywh=True).asnumpy()
    assert xywh == pytest.approx(got[0], abs=1e-5)


def test_v5_assignment_uses_matching_anchors_and_the_two_nearest_neighbour_cells(scratch):
    from workloads.yolo.loss_v5 import v5_candidates

    anchors = tensor(np.array([10, 13, 16, 30, 33, 23]).reshape(3, 2) / 8)          # P3 anchors, grid units
    # One 16x16 px box centred at (28.8, 67.2) px of a 96 px image: grid (3.6, 8.4), size 2 cells;
    # a 95 px box no P3 anchor matches (11.9 cells: ratio > 4 to all); one padding row.
    labels = tensor([[[1, 2, 0.3, 0.7, 16 / 96, 16 / 96], [1, 0, 0.5, 0.5, 0.99, 0.99], [0, 0, 0.5, 0.5, 0.2, 0.2]]])
    valid, index, tbox, _ = v5_candidates(labels, 12, 12, anchors, 4.0)
    valid, index, tbox = valid.asnumpy(), index.asnumpy(), tbox.asnumpy()
    # own cell, left (x frac 0.6: no), up (y frac 0.4: yes), right (yes), down (no) for every anchor
    assert valid[0, 0].tolist() == [[True, False, True, True, False]] * 3
    assert not valid[0, 1].any() and not valid[0, 2].any()
    cells = {(int(i) % 144 % 12, int(i) % 144 // 12) for i in index[0, 0][valid[0, 0]]}
    assert cells == {(3, 8), (3, 7), (4, 8)}                                          # (gi, gj)
    assert sorted({int(i) // 144 for i in index[0, 0][valid[0, 0]]}) == [0, 1, 2]     # all three anchors
    assert tbox[0, 0, 0, 0] == pytest.approx([0.6, 0.4, 2, 2], abs=1e-5)              # offset inside own cell
    assert tbox[0, 0, 0, 2] == pytest.approx([0.6, 1.4, 2, 2], abs=1e-5)              # from the cell above


@pytest.mark.slow
def test_task_aligned_assigner_on_hand_made_boxes(scratch):
    from workloads.yolo.boxes import bbox_ciou
    from workloads.yolo.loss_v8 import TaskAlignedAssigner

    anchors = np.array([[4, 4], [12, 4], [20, 4], [28, 4]], np.float32)               # one row of 8 px cells
    preds = np.array([[0, 0, 16, 8], [8, 0, 24, 8], [8, 0, 32, 8], [28, 0, 30, 8]], np.float32)
    gt = np.array([[0, 0, 16, 8], [8, 0, 32, 8], [0, 0, 0, 0]], np.float32)            # third row is padding
    scores = np.full((1, 4, 2), 0.5, np.float32)
    assigner = TaskAlignedAssigner(num_classes=2, topk=2)
    boxes, target_scores, fg = assigner(tensor(scores), tensor(preds[None]), tensor(anchors),
                                        tensor([[0, 1, 0]], np.int32), tensor(gt[None]), tensor([[1, 1, 0]]))
    boxes, target_scores, fg = boxes.asnumpy()[0], target_scores.asnumpy()[0], fg.asnumpy()[0]
    # gt0 contains anchors 0-1, gt1 anchors 1-3; top-2 of gt1 are anchors 2 and 1; anchor 1 overlaps gt1 more
    assert fg.tolist() == [True, True, True, False]
    assert boxes[:3].tolist() == [gt[0].tolist(), gt[1].tolist(), gt[1].tolist()]
    assert target_scores[0] == pytest.approx([1, 0], abs=1e-4)                       # its gt's best anchor
    assert target_scores[2] == pytest.approx([0, 1], abs=1e-4)
    ciou_1 = float(bbox_ciou(tensor(gt[1]), tensor(preds[1])).asnumpy())               # (score/score)^0.5 cancels
    assert target_scores[1] == pytest.approx([0, ciou_1**6], rel=1e-3)
    assert target_scores[3].tolist() == [0, 0]


@pytest.mark.slow
def test_recompute_marks_csp_blocks_selectively_and_every_conv_block_fully(scratch):
    from workloads.yolo.layers import C2f, C3

    for name, kind in (("yolov5s", C3), ("yolov8n", C2f)):
        wl = get_workload(name)
        network = wl.build_network(wl.preset("tiny"))
        selective = wl.recompute_blocks(network, full=False)
        full = wl.recompute_blocks(network, full=True)
        assert len(selective) == 8 and all(isinstance(b, kind) for b in selective)
        assert set(map(id, selective)) < set(map(id, full))


@pytest.mark.slow
def test_recompute_finds_the_same_blocks_after_amp_o1_rewrites_the_cells(scratch):
    import mindspore as ms

    wl = get_workload("yolov5s")
    plain = wl.build_network(wl.preset("tiny"))
    rewritten = ms.amp.auto_mixed_precision(wl.build_network(wl.preset("tiny")), "O1")
    for full in (False, True):
        assert len(wl.recompute_blocks(rewritten, full)) == len(wl.recompute_blocks(plain, full))


def test_pipeline_yields_letterboxed_images_and_padded_labels(scratch):
    wl = get_workload("yolov8n")
    preset = wl.preset("tiny", {"train_samples": 8})
    image, labels = next(wl.make_dataset(preset, "train", Settings(), 4).create_tuple_iterator(output_numpy=True))
    assert image.shape == (4, 3, 96, 96) and image.dtype == np.float32 and 0 <= image.min() <= image.max() <= 1
    assert labels.shape == (4, preset.max_boxes, 6)
    valid = labels[labels[..., 0] > 0]
    assert len(valid) >= 4 and set(valid[:, 1]) <= {0, 1, 2} and (valid[:, 2:] > 0).all() and (valid[:, 2:] <= 1).all()


@pytest.mark.parametrize("preset", ["tiny", "full"])
def test_the_three_networks_feed_one_pipeline_and_read_its_one_host_cost_entry(preset):
    """yolov5s and yolov8s read yolov8n's calibration entry because their pipelines are the same: same source,
    same transform; a pipeline field carried as an override keeps them apart, a network field does not."""
    from workloads.registry import calibration_entry

    source = get_workload("yolov5s").data_workload

    def pipeline(name, overrides):
        wl = get_workload(name)
        spec = wl.pipeline_spec(wl.preset(preset, overrides), "train")
        (stage,) = spec.stages
        (transform,) = stage.operations
        return spec.source_key, spec.columns, transform.mode, transform.size, transform.max_boxes, transform.cfg

    for name in PUBLISHED:
        assert pipeline(name, {}) == pipeline(source, {})
        assert calibration_entry(name, preset, {}) == (source, preset, {})
        assert calibration_entry(name, preset, {"width": 0.75, "image_size": 320}) == \
            (source, preset, {"image_size": 320})
    assert pipeline("yolov8s", {"image_size": 320}) != pipeline(source, {})


def batches(dataset) -> list[tuple[np.ndarray, ...]]:
    return [tuple(b) for b in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)]


def test_augmented_batches_do_not_depend_on_workers_or_storage(scratch):
    wl = get_workload("yolov8n")
    preset = wl.preset("tiny", {"train_samples": 16, "eval_samples": 8})
    one = batches(wl.make_dataset(preset, "train", Settings(), 4))
    two = batches(wl.make_dataset(preset, "train", Settings(workers=2), 4))
    assert len(one) == 4 and all(np.array_equal(a, b) for x, y in zip(one, two) for a, b in zip(x, y))
    generated = batches(wl.make_dataset(preset, "eval", Settings(), 4))
    stored = batches(wl.make_dataset(preset, "eval", Settings(data_format="mindrecord"), 4, workdir=scratch))
    assert all(np.array_equal(a, b) for x, y in zip(generated, stored) for a, b in zip(x, y))


@pytest.mark.slow
def test_full_pipeline_mosaics_decoded_jpegs_from_mindrecord(scratch):
    wl = get_workload("yolov5s")
    preset = wl.preset("full", {"train_samples": 4, "batch_size": 2})
    spec = wl.pipeline_spec(preset, "train")
    assert spec.columns[:2] == ["jpeg0", "boxes0"] and len(spec.columns) == 9
    dataset = wl.make_dataset(preset, "train", Settings(data_format="mindrecord"), 2, workdir=scratch)
    image, labels = next(dataset.create_tuple_iterator(output_numpy=True))
    assert image.shape == (2, 3, 640, 640) and labels.shape == (2, 160, 6)
    assert (image == 114 / 255).mean() < 0.9 and (labels[..., 0] > 0).sum() >= 2


def test_preset_validation_names_the_field():
    wl = get_workload("yolov8n")
    with pytest.raises(ConfigError, match="image_size"):
        wl.preset("tiny", {"image_size": 100})
    with pytest.raises(ConfigError, match="augment"):
        wl.preset("tiny", {"augment": "cutmix"})


REPEAT_STEPS = 6


def parameter_values(cell) -> dict[str, np.ndarray]:
    return {p.name: p.asnumpy().copy() for p in cell.get_parameters()}


@pytest.mark.slow
@pytest.mark.long               # the yolov8n training below covers the same network classes at another width
def test_yolov8s_tiny_learns_in_its_first_steps_deterministically(graph_mode):
    """YOLOv8s is YOLOv8n's network at a wider width (the accuracy run below trains v8n): its own preset
    must compile, learn and repeat bit for bit from a fresh build over its first updates."""
    from workloads.train_step import build_train_step, steps_per_epoch

    wl = get_workload("yolov8s")
    preset = wl.preset("tiny")
    settings = Settings(mode="graph")

    def first_losses(steps):
        step = build_train_step(wl, preset, settings, total_steps=preset.epochs * steps_per_epoch(preset, settings))
        data = wl.make_dataset(preset, "train", settings, preset.batch_size).create_tuple_iterator(num_epochs=1)
        return [float(step.cell(*batch).asnumpy()) for batch, _ in zip(data, range(steps))]

    losses = first_losses(40)
    assert np.isfinite(losses).all() and np.mean(losses[-8:]) < 0.9 * np.mean(losses[:4]), losses
    assert first_losses(REPEAT_STEPS) == losses[:REPEAT_STEPS]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov8n", pytest.param("yolov5s", marks=pytest.mark.long)])
def test_tiny_trains_in_graph_mode_to_map_above_chance_bit_identically(name, graph_mode):
    """The accuracy run of `train_step.train`, spelled out so its compiled step can be replayed: a second
    run is a fresh build (its initial parameters must equal the first's), a fresh pipeline and the same
    graph, so the replay checks every source of run-to-run difference without a second compile."""
    from mindspore import Tensor

    from workloads.train_step import build_train_step, steps_per_epoch

    wl = get_workload(name)
    preset = wl.preset("tiny")
    settings = Settings(mode="graph")
    total = preset.epochs * steps_per_epoch(preset, settings)
    step = build_train_step(wl, preset, settings, total_steps=total)
    initial = parameter_values(step.cell)
    losses = []
    data = wl.make_dataset(preset, "train", settings, preset.batch_size)
    for _ in range(preset.epochs):
        losses.extend(float(step.cell(*batch).asnumpy()) for batch in data.create_tuple_iterator(num_epochs=1))
    metrics = wl.evaluate(step.network, preset)
    assert len(losses) == total == preset.epochs * (preset.train_samples // preset.batch_size)
    assert np.mean(losses[-20:]) < 0.75 * np.mean(losses[:5])
    assert set(metrics) == {"map50", "map50_95"} and 0 <= metrics["map50_95"] <= metrics["map50"] <= 1
    assert metrics["map50"] > wl.chance(preset) + TINY_MAP50

    second = parameter_values(build_train_step(wl, preset, settings, total_steps=total).cell)
    assert second.keys() == initial.keys() and all(np.array_equal(second[k], initial[k]) for k in initial)
    for parameter in step.cell.get_parameters():
        parameter.set_data(Tensor(initial[parameter.name]))
    step.cell.set_train(True)
    data = wl.make_dataset(preset, "train", settings, preset.batch_size)
    again = [float(step.cell(*batch).asnumpy())
             for batch, _ in zip(data.create_tuple_iterator(num_epochs=1), range(REPEAT_STEPS))]
    assert again == losses[:REPEAT_STEPS]          # bit-identical floats

    import mindspore as ms                         # the same first step eagerly (PyNative)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    eager = build_train_step(wl, preset, Settings(), total_steps=total)
    first = next(wl.make_dataset(preset, "train", settings, preset.batch_size).create_tuple_iterator(num_epochs=1))
    assert float(eager.cell(*first).asnumpy()) == pytest.approx(losses[0], rel=1e-5)
