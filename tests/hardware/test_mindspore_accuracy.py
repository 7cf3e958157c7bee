"""Accuracy runs: which knobs matter, the cache key, and runs that cannot be made."""

from __future__ import annotations

import pytest

from hardware.mindspore.accuracy import (NUMERICS_KNOBS, accuracy_key, accuracy_preset, accuracy_settings,
                                         measure_accuracy, workload_sources)
from hardware.mindspore.resolve import load_workload
from msbench.errors import ConfigError
from msbench.settings import make_settings


def test_only_numerics_knobs_are_kept():
    s = make_settings({"mode": "pynative", "workers": 2, "prefetch": 4, "amp_level": "O2", "loss_scale": "static",
                       "batch_size": 8, "grad_accum": 2, "optimizer": "adam", "lr_schedule": "cosine", "seed": 7})
    acc = accuracy_settings(s)
    assert acc.mode == "graph" and acc.workers == 1 and acc.prefetch == 16
    for knob in NUMERICS_KNOBS:
        assert getattr(acc, knob) == getattr(s, knob)


def test_data_parallel_trains_as_accumulated_micro_batches():
    acc = accuracy_settings(make_settings({"devices": 4, "grad_accum": 2, "batch_size": 8}))
    assert (acc.devices, acc.grad_accum, acc.batch_size) == (1, 8, 8)


def test_key_ignores_speed_knobs_and_follows_numerics(toy_cell):
    base = accuracy_key(toy_cell(mode="graph"))
    assert accuracy_key(toy_cell(mode="pynative", workers=2)) == base
    assert accuracy_key(toy_cell(amp_level="O2")) != base
    assert accuracy_key(toy_cell(seed=2)) != base
    assert accuracy_key(toy_cell(overrides={"hidden": 16})) != base


def test_accuracy_uses_the_tiny_preset_without_an_accuracy_preset(toy_cell):
    toy = load_workload(toy_cell().workload)
    assert accuracy_preset(toy_cell(preset="wide", overrides={"hidden": 8}), toy) == ("tiny", {})
    assert accuracy_preset(toy_cell(overrides={"hidden": 8}), toy) == ("tiny", {"hidden": 8})


@pytest.mark.parametrize("workload", ["resnet50", "yolov8s"])
def test_full_cells_train_the_accuracy_preset_and_tiny_cells_their_tiny_one(workload):
    from msbench.cell import Cell

    wl = load_workload(workload)
    assert accuracy_preset(Cell(workload=workload, preset="full", overrides={"image_size": 320}), wl) == ("accuracy", {})
    assert accuracy_preset(Cell(workload=workload, preset="tiny", overrides={"epochs": 1}), wl) == ("tiny", {"epochs": 1})


def test_sources_of_a_family_package_and_of_a_lone_module(toy_cell):
    lone = workload_sources(load_workload(toy_cell().workload))
    assert [p.name for p in lone[:2]] == ["toy_workload.py", "toy_presets.toml"]
    assert any(p.name == "train_step.py" for p in lone)
    resnet = workload_sources(load_workload("resnet50"))
    assert resnet[0].name == "resnet50" and resnet[0].is_dir()


@pytest.mark.parametrize("knobs,needle", [({"optimizer": "lamb"}, "no CPU kernel for Lamb"),
                                          ({"batch_size": 512}, "exceed the 256 training samples")])
def test_impossible_runs_say_why(toy_cell, private_cache, knobs, needle):
    result = measure_accuracy(toy_cell(**knobs))
    assert result.value is None and needle in result.reason


def test_unknown_workload_path_is_a_config_error():
    with pytest.raises(ConfigError, match="workload"):
        load_workload("msbench.cell:Cell")


@pytest.mark.slow
def test_a_failed_accuracy_run_is_recorded_not_raised(toy_env, toy_cell):
    from hardware.mindspore.target import add_accuracy
    from msbench.records import Record

    record = Record(cell=toy_cell(overrides={"hidden": 0}), status="ok")
    add_accuracy(record)
    assert record.metrics.accuracy is None
    assert "accuracy run failed" in record.metrics.extra["accuracy_run"]["reason"]


def test_a_full_size_batch_is_a_ratio_for_the_accuracy_run():
    from hardware.mindspore.accuracy import ACCURACY_PRESET, accuracy_cell_settings
    from msbench.cell import Cell
    from workloads.registry import get_workload

    wl = get_workload("resnet50")
    full, tiny = wl.preset("full").batch_size, wl.preset(ACCURACY_PRESET).batch_size

    def batch(preset, knobs):
        return accuracy_cell_settings(Cell(workload="resnet50", preset=preset, settings=make_settings(knobs)),
                                      wl).batch_size

    assert batch("full", {}) is None                               # the accuracy preset's own batch
    assert batch("full", {"batch_size": full}) == tiny
    assert batch("full", {"batch_size": 2 * full}) == 2 * tiny
    assert batch("tiny", {"batch_size": 8}) == 8
