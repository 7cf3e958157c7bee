"""Peer cross-check: mindyolo's YOLOv8n and YOLOv8s, written elsewhere, against msbench's own `yolov8n`/`yolov8s`.

The two are the same published architecture fed the same data, so any difference in parameter count,
forward FLOPs or the device model's step time, memory and bound is a bug in one of the networks or in the
extraction (the graph the device model reads). The adapter itself (names, presets, the missing-package
and broken-import lines, inference outputs through msbench's decoder) is tested here too. Full-size graphs
come from small reference-batch extractions scaled exactly (hardware/model/scaling.py) and are cached.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from msbench.errors import ConfigError, UserError
from msbench.settings import Settings, make_settings
from workloads import registry
from workloads.zoo import mindyolo as adapter

pytest.importorskip("cv2", reason="the zoo extra is not installed: pip install -e '.[zoo]'")
pytest.importorskip("mindyolo", reason="the zoo extra is not installed: pip install -e '.[zoo]'")

PEERS = {"yolov8n": "mindyolo:yolov8n", "yolov8s": "mindyolo:yolov8s"}
PROFILES = ("ascend910a", "ascend910b")
BATCHES = (32, 256)
DEVICE_MODEL_RTOL = 0.05
FLOPS_RTOL = 0.01
# mindyolo keeps two non-trainable Parameters msbench's network does not: the head's strides (3 ints)
# and DFL's fixed 1x1 convolution over the reg_max=16 bins (msbench's decoder and loss use a constant).
MINDYOLO_EXTRA_STATE = 3 + 16


def test_zoo_names_resolve_to_the_adapter_and_unknown_configs_are_refused():
    workload = registry.get_workload("mindyolo:yolov8m")
    assert workload.name == "mindyolo:yolov8m" and workload.family == "mindyolo"
    assert sorted(workload.presets()) == ["accuracy", "full", "tiny"]   # its data workload's, at its scale
    assert registry.check_workload("mindyolo:yolov8s") == "mindyolo:yolov8s"     # a zoo name needs no flag
    assert "mindyolo 0.5.0" in registry.workload_origin("mindyolo:yolov8n")
    with pytest.raises(ConfigError, match="mindyolo config='yolov5s'"):
        registry.get_workload("mindyolo:yolov5s")


def test_presets_are_the_peers_with_the_configs_multiples():
    for ours, theirs in PEERS.items():
        for name in ("full", "tiny"):        # n and s: the same network at every preset
            assert registry.get_workload(theirs).preset(name) == registry.get_workload(ours).preset(name)
    m_full, m_tiny = (registry.get_workload("mindyolo:yolov8m").preset(p) for p in ("full", "tiny"))
    assert (m_full.depth, m_full.width, m_full.max_channels) == (0.67, 0.75, 768)
    assert (m_tiny.depth, m_tiny.width) == (0.67, 0.1875) and m_tiny.image_size == 96
    wl = registry.get_workload("mindyolo:yolov8n")
    assert wl.calibrated_pipeline("tiny", {"width": 0.5, "image_size": 128}) == ("yolov8n", "tiny", {"image_size": 128})


@pytest.mark.parametrize("missing, says", [("mindyolo", "the mindyolo package"), ("cv2", "OpenCV")])
def test_a_missing_package_says_how_to_install_it_when_the_name_is_resolved(monkeypatch, missing, says):
    find_spec = adapter.importlib.util.find_spec
    monkeypatch.setattr(adapter.importlib.util, "find_spec", lambda name: None if name == missing else find_spec(name))
    with pytest.raises(UserError, match=rf"need {says}.*not installed; pip install 'msbench\[zoo\]'"):
        adapter.MindYOLOWorkload("yolov8n")


def test_an_import_that_fails_says_why_and_how_to_check(monkeypatch):
    def no_cv2(name):
        raise ModuleNotFoundError("No module named 'cv2'")

    monkeypatch.setattr(adapter.importlib, "import_module", no_cv2)
    with pytest.raises(UserError, match=r"`import mindyolo` fails \(ModuleNotFoundError: No module named 'cv2'\).*"
                                        r"opencv-python-headless==.*check with: python -c 'import mindyolo'"):
        adapter.require_mindyolo()


def test_zoo_sources_include_mindyolos_models_and_msbenchs_yolo():
    sources = registry.workload_sources("mindyolo:yolov8n")
    assert any(p.name == "models" and p.parent.name == "mindyolo" for p in sources)
    assert any(p.name == "yolo" and p.parent.name == "workloads" for p in sources)
    assert adapter.CONFIGS_FILE in sources and all(p.exists() for p in sources)


@pytest.mark.slow
def test_recompute_marks_the_same_blocks_as_msbenchs_yolo_also_after_amp_o1_rewrites_the_cells(scratch):
    import mindspore as ms

    for ours, theirs in PEERS.items():
        counts = []
        for name in (ours, theirs):
            wl = registry.get_workload(name)
            network = wl.build_network(wl.preset("tiny"))
            counts.append([len(wl.recompute_blocks(network, full)) for full in (False, True)])
        assert counts[0] == counts[1] and counts[0][0] > 0
    wl = registry.get_workload("mindyolo:yolov8n")
    plain = wl.build_network(wl.preset("tiny"))
    rewritten = ms.amp.auto_mixed_precision(wl.build_network(wl.preset("tiny")), "O1")
    for full in (False, True):
        assert len(wl.recompute_blocks(rewritten, full)) == len(wl.recompute_blocks(plain, full))


@pytest.mark.slow
@pytest.mark.parametrize("ours", sorted(PEERS))
def test_the_same_trainable_parameters(ours, scratch):
    from workloads.base import trainable_parameters

    counts = {}
    for name in (ours, PEERS[ours]):
        workload = registry.get_workload(name)
        network = workload.build_network(workload.preset("full"))
        counts[name] = (trainable_parameters(network), sum(int(p.size) for p in network.get_parameters()))
    (mine, mine_all), (theirs, theirs_all) = counts[ours], counts[PEERS[ours]]
    assert theirs == mine and theirs_all == mine_all + MINDYOLO_EXTRA_STATE


@pytest.mark.slow
@pytest.mark.parametrize("ours", [pytest.param(name, marks=pytest.mark.long) if name == "yolov8s" else name
                                  for name in sorted(PEERS)])     # yolov8s: yolov8n's classes at another width
def test_forward_gflops_agree(ours, scratch):
    from msbench.commands.summary import workload_row

    assert workload_row(PEERS[ours])["gflops"] == pytest.approx(workload_row(ours)["gflops"], rel=FLOPS_RTOL)


@pytest.mark.slow
@pytest.mark.long       # a further YOLO training (yolov8n's tiny training stays in make test)
def test_tiny_learns_and_evaluates_through_msbenchs_decoder(graph_mode):
    """mindyolo's training outputs feed msbench's YOLOv8 loss, and its inference outputs (decoded boxes,
    raw maps) msbench's decoder and mAP: a few steps must lower the loss and evaluation must run."""
    from workloads.train_step import build_train_step, steps_per_epoch

    wl = registry.get_workload("mindyolo:yolov8n")
    preset = wl.preset("tiny", {"eval_samples": 16})
    settings = Settings(mode="graph")
    step = build_train_step(wl, preset, settings, total_steps=preset.epochs * steps_per_epoch(preset, settings))
    data = wl.make_dataset(preset, "train", settings, preset.batch_size).create_tuple_iterator(num_epochs=1)
    losses = [float(step.cell(*batch).asnumpy()) for batch, _ in zip(data, range(24))]
    assert np.isfinite(losses).all() and np.mean(losses[-6:]) < 0.9 * np.mean(losses[:4]), losses
    metrics = wl.evaluate(step.network, preset)
    assert set(metrics) == {"map50", "map50_95"} and 0 <= metrics["map50_95"] <= metrics["map50"] <= 1


# The device-model comparison compiles both networks of a pair at full size: yolov8n's pair only, since
# yolov8s is the same two network classes at another width (its forward GFLOPs are compared above).
PREDICTED_PEERS = {"yolov8n": PEERS["yolov8n"]}


@pytest.fixture(scope="module")
def predictions():
    from hardware.model.outcome import predict_cell
    from msbench.cell import Cell

    return {(name, profile, batch): predict_cell(Cell(workload=name, preset="full", settings=make_settings({"batch_size": batch})),
                                                     profile).prediction
            for pair in PREDICTED_PEERS.items() for name in pair for profile in PROFILES for batch in BATCHES}


@pytest.mark.slow
@pytest.mark.long               # four full-size compiles; mindcv's pair (test_zoo_mindcv.py) checks the same join
@pytest.mark.parametrize("ours", sorted(PREDICTED_PEERS))
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("batch", BATCHES)
def test_device_model_agrees_on_both_networks(predictions, ours, profile, batch):
    mine, theirs = (predictions[(name, profile, batch)] for name in (ours, PEERS[ours]))
    assert theirs.bound == mine.bound
    assert theirs.step_time_s == pytest.approx(mine.step_time_s, rel=DEVICE_MODEL_RTOL)
    # Both steps are data-bound at the full preset's workers: compare the device's own time too.
    assert theirs.detail["device_s"] == pytest.approx(mine.detail["device_s"], rel=DEVICE_MODEL_RTOL)
    assert theirs.peak_memory_bytes == pytest.approx(mine.peak_memory_bytes, rel=DEVICE_MODEL_RTOL)
    # The same parameters get the same update: mindyolo's activation-gradient sums, compiled under a bare
    # scope, were once costed as optimizer work (hardware/model/dataflow.py feeds_backward), 23x at batch 256.
    assert theirs.breakdown["optimizer"] == pytest.approx(mine.breakdown["optimizer"], rel=DEVICE_MODEL_RTOL)


def test_presets_differ_from_the_peer_only_in_network_fields():
    full_m = dataclasses.asdict(registry.get_workload("mindyolo:yolov8x").preset("full"))
    full_s = dataclasses.asdict(registry.get_workload("yolov8s").preset("full"))
    assert {k for k in full_m if full_m[k] != full_s[k]} == set(adapter.NETWORK_FIELDS)
