"""The pipeline and memory tip knobs: each one's effect on the device model (or its refusal), the Ascend
plan of the real target, and the real CPU pipeline under the data knobs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.capabilities import Facts, refusal
from hardware.knob_table import capability
from hardware.mindspore.backend import plan_context
from hardware.model import pipeline_modes as pm
from hardware.model.pipeline_modes import HostWithModes
from hardware.model.predict import predict
from hardware.model.profile import load_profile, with_estimate
from model_graphs import FakeHost, fake_modes, mlp_step  # noqa: E402
from msbench.settings import make_settings

NPU, A910, CPU = load_profile("ascend910b"), load_profile("ascend910a"), load_profile("cpu")
GRAPH = dataclasses.replace(mlp_step(32), meta={"steps_per_epoch": 9})
MODES = fake_modes()
HOST = HostWithModes(FakeHost(per_sample_s=2e-4, bytes_per_sample=150_528), MODES)


def run(profile=NPU, **knobs):
    return predict(GRAPH, make_settings({"mode": "graph", **knobs}), profile, HOST)


def data_total(**knobs) -> float:
    return run(**knobs).detail["data_total_s"]


def test_process_workers_and_shared_memory_scale_the_pipeline_by_their_measured_ratios():
    threads = data_total()
    assert data_total(python_multiprocessing=True) == pytest.approx(threads * MODES.process_ratio[1], rel=1e-5)
    assert data_total(python_multiprocessing=True, shared_mem=False) == pytest.approx(
        threads * MODES.process_no_shm_ratio[1], rel=1e-5)
    eight = data_total(workers=8)           # beyond the 2 measured workers the 2-worker ratio is carried
    assert data_total(workers=8, python_multiprocessing=True) == pytest.approx(eight * MODES.process_ratio[2], rel=1e-5)


def test_the_carried_process_ratio_is_an_estimate_read_only_beyond_two_workers():
    knobs = {"workers": 8, "python_multiprocessing": True}
    assert "tips.process_ratio_carry" in run(**knobs).detail["estimates"]
    assert "tips.process_ratio_carry" not in run(workers=2, python_multiprocessing=True).detail["estimates"]
    assert not any(k.startswith("tips.") for k in run(workers=8).detail["estimates"])
    none_carried = with_estimate(NPU, "tips.process_ratio_carry", 0.0)       # the range's low end: the 1-worker ratio
    eight = run(none_carried, workers=8).detail["data_total_s"]
    assert run(none_carried, **knobs).detail["data_total_s"] == pytest.approx(eight * MODES.process_ratio[1], rel=1e-5)
    half = with_estimate(NPU, "tips.process_ratio_carry", 0.5)
    assert run(half, **knobs).detail["data_total_s"] == pytest.approx(
        eight * (MODES.process_ratio[1] + MODES.process_ratio[2]) / 2, rel=1e-5)


def test_device_augmentation_moves_the_vision_share_and_keeps_decode_where_jpegd_is_missing():
    host_only = data_total()
    moved = data_total(augment_device="ascend")
    assert moved == pytest.approx(max(host_only * (1 - 0.6), 32 * pm.dvpp_seconds_per_sample(MODES, NPU)),
                                  rel=1e-5)
    on_910a = run(A910, augment_device="ascend").detail["data_total_s"]
    assert on_910a == pytest.approx(run(A910).detail["data_total_s"] * (1 - 0.1), rel=1e-5)   # Normalize only
    assert pm.moved_ops(MODES, "ascend910a") == ("Normalize",)
    def tips(profile=NPU, **knobs):
        return [e for e in run(profile, **knobs).detail["estimates"] if e.startswith("tips.")]

    assert tips(augment_device="ascend") == ["tips.jpegd_fps", "tips.vpc_fps"]
    assert tips(A910, augment_device="ascend") == ["tips.vpc_fps"] and tips() == []      # no JPEGD on the 910A
    faster = with_estimate(NPU, "tips.vpc_fps", 4320.0)
    assert pm.dvpp_seconds_per_sample(MODES, faster) < pm.dvpp_seconds_per_sample(MODES, NPU)
    assert capability("augment_device", "ascend", "model:cpu").status == "refused"
    assert "DVPP" in capability("augment_device", "ascend", "mindspore:cpu").text


def test_a_ragged_last_batch_charges_one_compile_per_epoch_in_graph_mode():
    kept = run(drop_remainder=False)
    expected = MODES.compile_s_per_op * len(GRAPH.ops) * NPU.tips.ascend_compile_scale / (9 + 1)
    assert kept.breakdown["recompile"] == pytest.approx(expected, rel=1e-5)
    assert kept.step_time_s > run().step_time_s and "recompile" not in run().breakdown
    assert "tips.ascend_compile_scale" in kept.detail["estimates"]
    slow = run(with_estimate(NPU, "tips.ascend_compile_scale", 8.0), drop_remainder=False)
    assert slow.breakdown["recompile"] == pytest.approx(expected * 8.0 / NPU.tips.ascend_compile_scale, rel=1e-5)
    pynative = make_settings({"drop_remainder": False})
    assert "graph mode only" in refusal(pynative, "model:npu", Facts())
    assert "no ragged last batch" in refusal(make_settings({"drop_remainder": False}), "mindspore:cpu",
                                             Facts(ragged_last_batch=False))


def test_somas_shrinks_the_fragmentation_and_the_cap_is_the_oom_threshold():
    base, somas = run(), run(memory_optimize_level="O1")
    assert somas.memory["fragmentation"] == pytest.approx(base.memory["fragmentation"] * NPU.tips.somas_packing_loss,
                                                          abs=1)
    assert somas.peak_memory_bytes < base.peak_memory_bytes
    assert "tips.somas_packing_loss" in somas.detail["estimates"] and "tips.somas_packing_loss" not in base.detail["estimates"]
    unpacked = run(with_estimate(NPU, "tips.somas_packing_loss", 1.0), memory_optimize_level="O1")
    assert unpacked.memory["fragmentation"] == pytest.approx(base.memory["fragmentation"], abs=1)   # the range's top: no gain
    capped = run(max_device_memory=0.001)
    assert capped.memory_capacity_bytes == int(0.001 * 2**30) and capped.oom and not base.oom
    assert "no fragmentation" in refusal(make_settings({"memory_optimize_level": "O1"}), "model:npu",
                                         Facts(fragmentation=0.0))
    assert "1978 vs 1824" in refusal(make_settings({"memory_optimize_level": "O1"}), "model:cpu",
                                     Facts(fragmentation=CPU.memory.fragmentation, host_is_device=CPU.host.shares_device))
    assert "either way" in refusal(make_settings({"max_device_memory": 64.0}), "model:npu",
                                   Facts(usable_gib=NPU.memory.usable_gib))
    assert "does not enforce" in refusal(make_settings({"max_device_memory": 8.0}), "mindspore:cpu", Facts())


def test_a_bare_host_cost_names_the_calibration_command():
    from msbench.errors import UserError

    with pytest.raises(UserError, match="msbench calibrate pipeline-modes"):
        predict(GRAPH, make_settings({"python_multiprocessing": True}), NPU, FakeHost(per_sample_s=2e-4))


def test_the_ascend_plan_sets_the_memory_pool():
    plan = plan_context(make_settings({"memory_optimize_level": "O1", "max_device_memory": 30.5}), "ascend")
    assert (plan.memory_optimize_level, plan.max_memory) == ("O1", "30.5GB")
    default = plan_context(make_settings({}), "ascend")
    assert (default.memory_optimize_level, default.max_memory) == (None, None)


def test_existing_cell_ids_do_not_move():
    """Defaults are omitted from the id: the same cell as on main before these knobs existed."""
    from msbench.cell import Cell

    cell = Cell(workload="resnet50", preset="tiny", settings=make_settings({"amp_level": "O2", "workers": 2}),
                target="model:ascend910b")
    assert cell.id == "722468e74eb0"


def test_the_ragged_batch_follows_the_split_and_the_batch():
    from workloads.pipeline import ragged_last_batch
    from workloads.registry import get_workload

    tiny = get_workload("resnet50").preset("tiny")          # 1024 samples
    assert not ragged_last_batch(tiny, make_settings({}))   # batch 32
    assert ragged_last_batch(tiny, make_settings({"batch_size": 48}))
    assert ragged_last_batch(tiny, make_settings({"batch_size": 32, "devices": 8})) is False   # 128 per rank


@pytest.mark.slow
def test_the_real_cpu_pipeline_keeps_the_ragged_batch_in_process_workers(tmp_path):
    """mindspore.dataset for real: two process workers without shared memory, the last batch kept."""
    from workloads.pipeline import device_vision_ops
    from workloads.registry import get_workload

    wl = get_workload("resnet50")
    tiny = wl.preset("tiny", {"train_samples": 40})
    settings = make_settings({"workers": 2, "python_multiprocessing": True, "shared_mem": False,
                              "drop_remainder": False, "batch_size": 16})
    sizes = [b[0].shape[0] for b in wl.make_dataset(tiny, "train", settings, 16, workdir=tmp_path)
             .create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert sizes == [16, 16, 8]
    spec = wl.pipeline_spec(tiny, "train")
    assert sorted(type(op).__name__ for op in device_vision_ops(spec.stages)) == ["Decode", "Normalize", "Resize"]


def test_device_augmentation_places_only_the_deterministic_ops_and_refuses_a_text_pipeline():
    from workloads.pipeline import MapStage, place_vision_ops
    from workloads.registry import get_workload

    wl = get_workload("resnet50")
    stages = wl.pipeline_spec(wl.preset("tiny"), "train").stages
    place_vision_ops(stages, "ascend")
    placed = {type(op).__name__: getattr(op, "device_target", "CPU") for op in stages[0].operations}
    assert placed == {"Decode": "Ascend", "Resize": "Ascend", "RandomHorizontalFlip": "CPU",
                      "Normalize": "Ascend", "HWC2CHW": "CPU"}
    with pytest.raises(ValueError, match="no deterministic vision op"):
        place_vision_ops([MapStage([lambda x: x], ["input_ids"])], "ascend")


def test_process_workers_are_refused_on_a_pipeline_without_python_stages(tmp_path):
    from workloads.pipeline import build_pipeline
    from workloads.registry import get_workload

    wl = get_workload("resnet50")
    spec = wl.pipeline_spec(wl.preset("tiny"), "train")          # MindRecord + C++ vision ops only
    settings = make_settings({"data_format": "mindrecord", "python_multiprocessing": True})
    with pytest.raises(ValueError, match="no Python stage"):
        build_pipeline(spec, settings, 32, workdir=tmp_path)


def test_the_calibration_file_holds_what_the_shipped_matrices_read():
    """resnet50/full carries the nightly's and claims' pipeline cells; every entry loads with its compile rate."""
    import json

    from workloads.registry import calibration_entry

    data = json.loads(pm.CALIBRATION_FILE.read_text())
    entries = data["pipelines"]
    assert "resnet50/full/generator" in entries
    for key in entries:
        workload, preset, fmt = key.split("/")
        modes = pm.pipeline_modes(workload, preset, fmt)
        assert min(modes.process_ratio.values()) > 0 and modes.compile_s_per_op > 0
        assert calibration_entry(workload, preset, {}) == (workload, preset, {})    # an entry the model reads
    assert set(data["compile"]) == {key.split("/")[0] for key in entries}
    assert pm.pipeline_modes("resnet50", "tiny", "generator").vision_shares
    assert not pm.pipeline_modes("bert-base", "tiny", "generator").vision_shares


@pytest.mark.slow
def test_a_real_cpu_cell_with_somas_and_a_ragged_batch(toy_env, toy_cell, monkeypatch):
    """mindspore:cpu end to end: set_memory(optimize_level="O1") applied, 256 samples at batch 24 kept ragged."""
    from msbench.cell_run import run_cell

    for name in ("PROCESSES", "MAX_PROCESSES"):
        monkeypatch.setenv(f"MSBENCH_MEASURE_{name}", "1")      # one measured process is enough here
    record = run_cell(toy_cell(mode="graph", memory_optimize_level="O1", drop_remainder=False, batch_size=24),
                      timeout=180.0)
    assert record.status == "ok", record.reason
    assert record.metrics.extra["memory_pool"] == {"optimize_level": "O1"}
    refused = run_cell(toy_cell(mode="graph", max_device_memory=1.0), timeout=60.0)
    assert refused.status == "unsupported" and "does not enforce" in refused.reason


def test_the_calibration_times_the_deterministic_vision_ops_eagerly():
    import numpy as np

    from hardware.calibration.pipeline_modes import pixels, vision_shares
    from workloads.registry import get_workload

    assert pixels(np.zeros((40, 30, 3))) == 1200 and pixels(np.zeros((3, 32, 32))) == 1024
    wl = get_workload("resnet50")
    measured = vision_shares(wl, wl.preset("tiny"))
    assert set(measured["vision_shares"]) == {"Decode", "Resize", "Normalize"}
    assert 0 < sum(measured["vision_shares"].values()) < 1
    assert (measured["stored_pixels"], measured["output_pixels"]) == (40 * 40, 32 * 32)
    bert = get_workload("bert-base")
    assert vision_shares(bert, bert.preset("tiny"))["vision_shares"] == {}
