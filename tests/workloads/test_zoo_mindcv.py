"""Peer cross-check: mindcv's ResNet-50, written elsewhere, against msbench's own `resnet50`.

The two networks are the same published architecture fed the same data, so any difference in parameter
count, forward FLOPs or the device model's step time, memory and bound is a bug in one of the networks
or in the extraction (the graph the device model reads). The adapter itself (names, presets, the
missing-package line) is tested here too. Full-size graphs come from small reference-batch extractions
scaled exactly (hardware/model/scaling.py) and are cached (msbench/cache.py), like `make bench`'s.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mindcv", reason="the zoo extra is not installed: pip install -e '.[zoo]'")

from msbench.errors import ConfigError, UserError  # noqa: E402
from msbench.settings import make_settings  # noqa: E402
from workloads import registry  # noqa: E402
from workloads.zoo import mindcv as adapter  # noqa: E402

# mindcv's README lists resnet50 at 25.61 M parameters: its count includes BatchNorm's moving mean and
# variance (53,120 of them), which are state, not trainable weights.
MINDCV_RESNET50_ALL_PARAMS = 25_610_152
PEERS = ("resnet50", "mindcv:resnet50")
PROFILES = ("ascend910a", "ascend910b")
BATCHES = (32, 256)
DEVICE_MODEL_RTOL = 0.05
FLOPS_RTOL = 0.01


def test_zoo_names_resolve_to_the_adapter_and_unknown_models_are_refused():
    workload = registry.get_workload("mindcv:convnext_tiny")
    assert workload.name == "mindcv:convnext_tiny" and workload.family == "mindcv"
    assert sorted(workload.presets()) == ["full", "tiny"]
    assert registry.check_workload("mindcv:convnext_tiny") == "mindcv:convnext_tiny"   # a zoo name needs no flag
    assert "mindcv 0.3.0" in registry.workload_origin("mindcv:resnet50")
    with pytest.raises(ConfigError, match="mindcv model='no_such_net'"):
        registry.get_workload("mindcv:no_such_net")


def test_presets_follow_the_model_and_feed_resnet50s_calibrated_pipeline():
    vit = registry.get_workload("mindcv:vit_b_32_224")
    cnn = registry.get_workload("mindcv:mobilenet_v3_large_100")
    resnet = registry.get_workload("resnet50")
    assert cnn.preset("full").image_size == 224 and cnn.preset("tiny").image_size == resnet.preset("tiny").image_size
    assert vit.preset("tiny").image_size == 224          # ViT's position embeddings fix its input size
    assert cnn.calibrated_pipeline("full", {}) == ("resnet50", "full", {})
    assert vit.calibrated_pipeline("tiny", {}) == ("resnet50", "tiny", {"image_size": 224})
    assert cnn.calibrated_pipeline("full", {"image_size": 160}) == ("resnet50", "full", {"image_size": 160})


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(adapter.importlib.util, "find_spec", lambda name: None)
    adapter.model_facts.cache_clear()
    try:
        with pytest.raises(UserError, match=r"pip install 'msbench\[zoo\]'"):
            adapter.MindCVWorkload("resnet18")
    finally:
        adapter.model_facts.cache_clear()


def test_zoo_sources_include_mindcvs_models(tmp_path):
    sources = registry.workload_sources("mindcv:resnet50")
    assert any(p.name == "models" and p.parent.name == "mindcv" for p in sources)
    assert adapter.PRESETS_FILE in sources and all(p.exists() for p in sources)


@pytest.mark.slow
def test_the_same_parameters_net_of_batchnorm_statistics(graph_mode):
    from workloads.base import trainable_parameters

    counts = {}
    for name in PEERS:
        workload = registry.get_workload(name)
        network = workload.build_network(workload.preset("full"))
        counts[name] = (trainable_parameters(network), sum(int(p.size) for p in network.get_parameters()))
    assert counts["mindcv:resnet50"][1] == MINDCV_RESNET50_ALL_PARAMS
    assert counts["resnet50"] == counts["mindcv:resnet50"]


@pytest.mark.slow
def test_forward_gflops_agree(scratch):
    from msbench.commands.summary import workload_row

    ours, theirs = (workload_row(name)["gflops"] for name in PEERS)
    assert theirs == pytest.approx(ours, rel=FLOPS_RTOL)


@pytest.fixture(scope="module")
def predictions():
    from hardware.model.outcome import predict_cell
    from msbench.cell import Cell

    return {(name, profile, batch): predict_cell(Cell(workload=name, preset="full", settings=make_settings({"batch_size": batch})),
                                                     profile).prediction
            for name in PEERS for profile in PROFILES for batch in BATCHES}


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("batch", BATCHES)
def test_device_model_agrees_on_both_networks(predictions, profile, batch):
    ours, theirs = (predictions[(name, profile, batch)] for name in PEERS)
    assert theirs.bound == ours.bound
    assert theirs.step_time_s == pytest.approx(ours.step_time_s, rel=DEVICE_MODEL_RTOL)
    # The step of both is data-bound at the full preset's 8 workers: compare the device's own time too.
    assert theirs.detail["device_s"] == pytest.approx(ours.detail["device_s"], rel=DEVICE_MODEL_RTOL)
    assert theirs.peak_memory_bytes == pytest.approx(ours.peak_memory_bytes, rel=DEVICE_MODEL_RTOL)


@pytest.mark.slow
def test_a_network_that_reads_a_parameter_while_built_is_extracted(private_cache, scratch):
    """mindcv's ConvNeXt scales its head's weight in its constructor: the shape-only build (no parameter data)
    cannot run it, so the extraction builds it with its values and still compiles without data."""
    from hardware.model.outcome import predict_cell
    from msbench.cell import Cell

    result = predict_cell(Cell(workload="mindcv:convnext_tiny", settings=make_settings({"mode": "graph"})), "ascend910b")
    assert result.prediction.step_time_s > 0 and result.graph.param_count > 1_000_000
    assert any(op.type == "LayerNorm" or "LayerNorm" in op.type for op in result.graph.ops)


def test_auxiliary_logits_add_their_weighted_loss_as_mindcv_trains_them(graph_mode):
    """Inception V3 returns (logits, aux logits) while training and the step spreads them into the loss: the
    loss is the main logits' plus AUX_FACTOR times the auxiliary's; one logits tensor passes through."""
    import mindspore as ms
    import numpy as np
    from mindspore import nn

    base = nn.CrossEntropyLoss(label_smoothing=0.1)
    loss = adapter.with_aux_logits(base)
    rng = np.random.default_rng(0)
    main, aux = (ms.Tensor(rng.normal(size=(4, 10)).astype(np.float32)) for _ in range(2))
    labels = ms.Tensor(np.array([1, 2, 3, 4], dtype=np.int32))
    assert loss(main, labels).asnumpy() == pytest.approx(base(main, labels).asnumpy(), rel=1e-6)
    expected = base(main, labels).asnumpy() + adapter.AUX_FACTOR * base(aux, labels).asnumpy()
    assert loss(main, aux, labels).asnumpy() == pytest.approx(expected, rel=1e-6)


RECIPE = {"auto_augment": "randaug-m9-mstd0.5-inc1", "re_prob": 0.25, "re_value": "random", "mixup": 0.8,
          "cutmix": 1.0, "interpolation": "bicubic", "color_jitter": 0.4}


def test_an_augmented_recipe_reads_one_entry_of_mindcvs_pipeline_whatever_the_network():
    pit, cnn = registry.get_workload("mindcv:pit_ti"), registry.get_workload("mindcv:mobilenet_v3_large_100")
    # mindcv jitters colour only without a policy, so the jitter is not part of this pipeline's identity
    entry = ("mindcv:resnet50", "full", {k: v for k, v in RECIPE.items() if k != "color_jitter"})
    assert pit.calibrated_pipeline("full", RECIPE) == entry == cnn.calibrated_pipeline("full", RECIPE)
    assert registry.calibration_entry("mindcv:pit_ti", "full", RECIPE) == entry
    assert registry.calibration_entry("mindcv:crossvit_9", "full", {"color_jitter": 0.4}) == (
        "mindcv:resnet50", "full", {"image_size": 240, "color_jitter": 0.4})
    assert cnn.calibrated_pipeline("full", {"interpolation": "bilinear"}) == ("resnet50", "full", {})


def test_an_augmented_recipe_runs_mindcvs_transforms_and_mixup_with_soft_labels(tmp_path):
    wl = registry.get_workload("mindcv:mobilenet_v3_small_100")
    preset = wl.preset("tiny", RECIPE)
    spec = wl.pipeline_spec(preset, "train")
    names = [type(op).__name__ for op in spec.stages[0].operations]
    assert names[0] == "RandomCropDecodeResize" and "RandAugment" in names and names[-1] == "RandomErasing"
    assert spec.per_batch is not None and wl.pipeline_spec(preset, "eval").per_batch is None
    plain, resnet = wl.preset("tiny"), registry.get_workload("resnet50")
    ours, theirs = wl.pipeline_spec(plain, "train"), resnet.pipeline_spec(wl.data_preset(plain), "train")
    assert ours.source_key == theirs.source_key and ours.per_batch is None
    assert [[type(op).__name__ for op in stage.operations] for stage in ours.stages] == [
        [type(op).__name__ for op in stage.operations] for stage in theirs.stages]
    images, labels = next(wl.make_dataset(preset, "train", make_settings({"data_format": "mindrecord"}), 8,
                                          workdir=tmp_path).create_tuple_iterator(output_numpy=True))
    assert images.shape == (8, 3, preset.image_size, preset.image_size)
    assert labels.shape == (8, preset.num_classes) and labels.dtype.name == "float32"
    assert abs(float(labels.sum()) - 8.0) < 1e-4                 # each row a distribution over the classes
    synthetic = wl.synthetic_batch(preset, 4)[1]
    assert synthetic.shape == (4, preset.num_classes) and synthetic.dtype.name == "float32"


@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("interpolation", "lanczos", "bilinear|bicubic|nearest|area"),
    ("auto_augment", "randomaug", "randaug|autoaug|3a|trivialaugwide|augmix"),
    ("re_value", "noise", "0|random"),
    ("re_prob", 1.5, "0 <= x <= 1"),
    ("mixup", -0.1, ">= 0"),
])
def test_a_bad_augmentation_is_one_line_naming_field_value_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError, match=f"{re.escape(f'{field}={value!r}')}.*{re.escape(allowed)}"):
        registry.get_workload("mindcv:resnet50").preset("tiny", {field: value})


def test_mixup_needs_an_even_batch():
    with pytest.raises(ConfigError, match="batch_size=75.*even"):
        registry.get_workload("mindcv:resnet50").preset("full", {"mixup": 0.2, "batch_size": 75})
