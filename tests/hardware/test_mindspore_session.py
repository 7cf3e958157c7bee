"""Pieces of a measured session that need MindSpore but not a whole cell run."""

from __future__ import annotations

import pytest

from hardware.mindspore.backend import plan_context
from hardware.mindspore.session import is_mindspore_oom, sink_steps_per_call, step_driver
from msbench.settings import make_settings
from toy_workload import ToyWorkload

ms = pytest.importorskip("mindspore")


def test_sink_path_calls_mindspores_data_sink(scratch):
    """The Ascend sink plan drives `ms.data_sink`; on this CPU MindSpore itself refuses it, which is
    why the CPU target reports sink as unsupported instead of measuring it."""
    toy = ToyWorkload()
    preset = toy.preset("tiny")
    settings = make_settings({"mode": "graph", "sink": True, "sink_size": 4, "jit_level": "O0"})
    plan = plan_context(settings, "ascend")
    data = toy.make_dataset(preset, "train", settings, preset.batch_size)
    from workloads.train_step import build_train_step

    step = build_train_step(toy, preset, make_settings({"mode": "graph"}))
    assert sink_steps_per_call(plan, data.get_dataset_size()) == 4      # what the driver would ask for
    with pytest.raises(ValueError, match="(?i)ascend or gpu"):
        step_driver(plan, step.cell, data)          # ms.data_sink refuses the CPU when it builds the sink


def test_host_driver_repeats_the_epoch(scratch):
    toy = ToyWorkload()
    preset = toy.preset("tiny")
    settings = make_settings({})
    data = toy.make_dataset(preset, "train", settings, preset.batch_size)
    fetch, _, per_call = step_driver(plan_context(settings, "cpu"), None, data)
    epoch = preset.train_samples // preset.batch_size
    batches = [fetch() for _ in range(epoch + 3)]                 # past the end of one epoch
    assert per_call == 1 and batches[-1][0].shape == (preset.batch_size, preset.features)


def test_oom_detection():
    assert is_mindspore_oom(MemoryError("Unable to allocate 40 GiB"))
    assert is_mindspore_oom(RuntimeError("- Memory not enough:\nMemory isn't enough and alloc failed, kernel name"))
    assert not is_mindspore_oom(RuntimeError("Kernel select failed"))
    assert not is_mindspore_oom(ValueError("Memory not enough"))
