"""Knob -> MindSpore API plan per device, and the knobs each device refuses (pure: no MindSpore)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hardware.mindspore import backend
from hardware.mindspore.config import MeasureConfig, check_device
from hardware.mindspore.session import sink_steps_per_call
from msbench.errors import ConfigError
from msbench.settings import make_settings


def reason(device="cpu", cpus=2, **knobs):
    return backend.unsupported_reason(make_settings(knobs), device, cpus=cpus, device_check=False)


def test_defaults_are_supported_everywhere():
    for device in ("cpu", "ascend", "gpu"):
        assert reason(device) is None


@pytest.mark.parametrize("knobs,needle", [
    ({"mode": "graph", "sink": True}, "silently falls back to non-sink"),
    ({"mode": "graph", "sink": True, "sink_size": 4}, "Ascend/GPU only"),
    ({"mode": "graph", "jit_level": "O1"}, "does no fusion"),
    ({"mode": "graph", "jit_level": "O2"}, "Ascend only"),
    ({"optimizer": "lars"}, "LARSUpdate"),
    ({"optimizer": "lamb"}, "Lamb"),
    ({"devices": 4}, "devices=4 exceeds the 2 CPUs"),
])
def test_cpu_refuses_knobs_it_cannot_honour(knobs, needle):
    text = reason("cpu", **knobs)
    assert text and needle in text
    assert reason("ascend", **knobs) is None          # the same knobs are real on Ascend


@pytest.mark.parametrize("device", ["cpu", "ascend", "gpu"])
def test_data_knobs_refused_on_every_device(device):
    assert "exceeds the 2 CPUs" in reason(device, workers=3)
    assert "prefetches at least one batch" in reason(device, prefetch=0)
    assert reason(device, workers=2, prefetch=1) is None


def test_absent_device_is_named(tmp_path, monkeypatch):
    """The device nodes are looked up under tmp_path, so both answers are checked on any host."""
    monkeypatch.setitem(backend.DEVICE_NODES, "ascend", str(tmp_path / "davinci[0-9]*"))
    assert not backend.device_present("ascend")
    text = backend.unsupported_reason(make_settings({}), "ascend", cpus=2)
    assert text == f"device=ascend: no Ascend device on this host ({tmp_path / 'davinci[0-9]*'} absent)"
    (tmp_path / "davinci0").touch()
    assert backend.device_present("ascend")
    assert backend.unsupported_reason(make_settings({}), "ascend", cpus=2) is None


def test_cpu_plan():
    plan = backend.plan_context(make_settings({"mode": "graph", "graph_kernel": True}), "cpu", threads=2)
    assert (plan.device, plan.mode, plan.jit_level, plan.graph_kernel, plan.threads) == ("CPU", "GRAPH_MODE", None,
                                                                                          True, 2)
    assert not plan.device_memory_counters and not plan.sink


def test_cpu_plan_splits_threads_between_ranks(monkeypatch):
    monkeypatch.setattr(backend, "host_cpus", lambda: 8)
    assert backend.plan_context(make_settings({"devices": 4}), "cpu").threads == 2


def test_ascend_plan_sets_jit_sink_and_device_counters():
    settings = make_settings({"mode": "graph", "jit_level": "O2", "sink": True, "sink_size": 10})
    plan = backend.plan_context(settings, "ascend")
    assert (plan.device, plan.mode, plan.jit_level) == ("Ascend", "GRAPH_MODE", "O2")
    assert plan.sink and plan.sink_size == 10 and plan.device_memory_counters
    assert plan.threads is None and plan.env == {}
    assert sink_steps_per_call(plan, epoch_steps=50) == 10
    whole_epoch = backend.plan_context(make_settings({"mode": "graph", "sink": True}), "ascend")
    assert sink_steps_per_call(whole_epoch, epoch_steps=50) == 50
    assert backend.plan_context(make_settings({}), "gpu").jit_level is None   # pynative: no jit level


def test_isa_cap_only_on_avx512_hosts(monkeypatch):
    monkeypatch.delenv(backend.ISA_ENV, raising=False)
    assert backend.isa_env("flags\t: fpu sse avx2 avx512f avx512bw\n") == {backend.ISA_ENV: "AVX2"}
    assert backend.isa_env("flags\t: fpu sse avx2\n") == {}
    monkeypatch.setenv(backend.ISA_ENV, "AVX512_CORE")
    assert backend.isa_env("flags\t: avx512f\n") == {backend.ISA_ENV: "AVX512_CORE"}


def test_supports_never_imports_mindspore():
    code = ("import sys, json; from hardware.mindspore.target import MindSporeTarget; from msbench.cell import Cell;"
            "from msbench.settings import make_settings;"
            "t = MindSporeTarget('cpu'); r = t.supports(Cell(workload='resnet50', settings=make_settings("
            "{'mode': 'graph', 'sink': True}), target='mindspore:cpu'));"
            "print(json.dumps([r, 'mindspore' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    text, imported = json.loads(out.strip().splitlines()[-1])
    assert "sink=true" in text and imported is False


def test_measure_config_from_env_and_validation():
    cfg = MeasureConfig.from_env({"MSBENCH_MEASURE_TIME_BUDGET_S": "2.5", "MSBENCH_MEASURE_MAX_STEPS": "30"})
    assert (cfg.time_budget_s, cfg.max_steps, cfg.min_steps) == (2.5, 30, MeasureConfig().min_steps)
    with pytest.raises(ConfigError, match="MSBENCH_MEASURE_MAX_STEPS"):
        MeasureConfig.from_env({"MSBENCH_MEASURE_MAX_STEPS": "many"})
    with pytest.raises(ConfigError, match="ci_target"):
        MeasureConfig(ci_target=0)
    with pytest.raises(ConfigError, match="min_steps"):
        MeasureConfig(min_steps=10, max_steps=5)
    with pytest.raises(ConfigError, match="device='tpu'"):
        check_device("tpu")
