"""ResNet-50: the published network's size, the tiny preset's training, the data pipeline and presets."""

from __future__ import annotations

import numpy as np
import pytest

from msbench.errors import ConfigError
from msbench.settings import Settings
from workloads.registry import get_workload

PUBLISHED_PARAMS = 25_557_032      # torchvision / NVIDIA ResNet-50 v1.5, 1000 classes


@pytest.fixture(scope="module")
def wl():
    return get_workload("resnet50")


@pytest.mark.slow
def test_full_network_has_the_published_parameter_count(wl, scratch):
    from workloads.base import trainable_parameters

    network = wl.build_network(wl.preset("full"))
    assert trainable_parameters(network) == pytest.approx(PUBLISHED_PARAMS, rel=0.005)


def test_downsampling_is_on_the_3x3_conv_v1_5(wl, scratch):
    from workloads.resnet50.network import Bottleneck

    blocks = [c for _, c in wl.build_network(wl.preset("tiny")).cells_and_names() if isinstance(c, Bottleneck)]
    second_stage_first = blocks[1]
    assert tuple(second_stage_first.conv1.stride[-2:]) == (1, 1)
    assert tuple(second_stage_first.conv2.stride[-2:]) == (2, 2)


def test_recompute_blocks_selective_marks_bottlenecks_full_adds_stem(wl, scratch):
    from workloads.resnet50.network import Bottleneck, Stem

    preset = wl.preset("tiny")
    network = wl.build_network(preset)
    selective = wl.recompute_blocks(network, full=False)
    full = wl.recompute_blocks(network, full=True)
    assert len(selective) == sum(preset.blocks) and all(isinstance(b, Bottleneck) for b in selective)
    assert len(full) == len(selective) + 1 and isinstance(full[0], Stem)


def run_tiny(wl):
    from workloads.train_step import train

    preset = wl.preset("tiny")
    result = train(wl, preset, Settings(mode="graph", seed=3), preset.epochs)
    return result.losses, wl.evaluate(result.network, preset)


@pytest.mark.slow
def test_tiny_trains_in_graph_mode_deterministically(wl, graph_mode):
    losses, metrics = run_tiny(wl)
    again, _ = run_tiny(wl)
    preset = wl.preset("tiny")
    assert len(losses) == preset.epochs * (preset.train_samples // preset.batch_size)
    assert np.mean(losses[-8:]) < 0.5 * np.mean(losses[:4])
    assert set(metrics) == {"top1"}
    assert metrics["top1"] > wl.chance(preset) + 0.4
    assert losses == again       # bit-identical floats


def batches(dataset):
    return [tuple(np.asarray(c) for c in b) for b in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)]


def test_mindrecord_and_generator_give_the_same_samples(wl, scratch):
    preset = wl.preset("tiny", {"eval_samples": 64})
    gen = batches(wl.make_dataset(preset, "eval", Settings(data_format="generator"), 16, workdir=scratch))
    rec = batches(wl.make_dataset(preset, "eval", Settings(data_format="mindrecord"), 16, workdir=scratch))
    assert len(gen) == len(rec) == 4
    for (gi, gl), (ri, rl) in zip(gen, rec):
        assert gi.dtype == ri.dtype == np.float32 and gi.shape == (16, 3, 32, 32)
        assert gl.dtype == rl.dtype == np.int32 and gl.shape == (16,)
        np.testing.assert_array_equal(gi, ri)
        np.testing.assert_array_equal(gl, rl)
    # written once: a second pipeline reuses the file
    assert len(list((scratch / "mindrecord").iterdir())) == 1


def test_full_train_split_decodes_jpegs_to_224_crops(wl, scratch):
    preset = wl.preset("full", {"train_samples": 8})
    source = wl.pipeline_spec(preset, "train").source
    jpeg, label = source[0]
    assert jpeg.dtype == np.uint8 and jpeg.ndim == 1 and bytes(jpeg[:2]) == b"\xff\xd8"   # JPEG SOI marker
    image, labels = batches(wl.make_dataset(preset, "train", Settings(), 4))[0]
    assert image.shape == (4, 3, 224, 224) and labels.shape == (4,)


def test_generated_images_are_deterministic_and_class_dependent(wl):
    preset = wl.preset("tiny")
    a = wl.pipeline_spec(preset, "train").source
    b = wl.pipeline_spec(preset, "train").source
    np.testing.assert_array_equal(a[5][0], b[5][0])
    assert int(a[5][1]) == 5 and int(a[6][1]) == 6
    assert not np.array_equal(a[5][0], a[6][0])


def test_sharding_splits_the_training_set(wl, scratch):
    preset = wl.preset("tiny", {"train_samples": 64})
    shards = [wl.make_dataset(preset, "train", Settings(), 8, rank=r, world=2).get_dataset_size() for r in (0, 1)]
    assert shards == [4, 4]


@pytest.mark.parametrize("overrides, field", [
    ({"blocks": [3, 0]}, "blocks"),
    ({"blocks": 4}, "blocks"),
    ({"augment": "autoaugment"}, "augment"),
    ({"image_size": "224"}, "image_size"),
    ({"num_classes": 1}, "num_classes"),
    ({"depth": 50}, "preset field"),
])
def test_bad_preset_override_raises_config_error(wl, overrides, field):
    with pytest.raises(ConfigError) as err:
        wl.preset("tiny", overrides)
    assert err.value.field == field


def test_unknown_split_is_refused(wl):
    with pytest.raises(ConfigError, match="split"):
        wl.pipeline_spec(wl.preset("tiny"), "test")
