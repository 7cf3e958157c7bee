"""The capability table: every knob value on every target kind changes what the real target asks
MindSpore to do, or an input of the device model, or is refused with its reason. Never a no-op."""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from dataclasses import asdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.capabilities import (EFFECTS, FORWARD, INFERENCE_KNOBS, KINDS, MODEL_KINDS, NUMBERS, NUMERICS, REAL_KINDS,
                                   REFUSALS, Facts, graph_knobs, knobs_changing, refusal)
from hardware.knob_table import capability, walk_contexts, walk_values
from hardware.mindspore.accuracy import NUMERICS_KNOBS, accuracy_settings
from hardware.mindspore.backend import plan_context, unsupported_reason
from workloads.parallel_plan import plan_parallel
from hardware.model.compute import has_flash_kernel
from hardware.model.graph import GRAPH_KNOBS, graph_key
from hardware.model.host_cost import entry_key
from hardware.model.predict import predict
from hardware.model.profile import load_profile
from hardware.model.compile_mode import compile_mode
from hardware.model.target import ModelTarget
from hardware.model.pipeline_modes import HostWithModes
from model_graphs import FakeHost, fake_modes, mlp_step  # noqa: E402
from msbench.errors import ConfigError
from msbench.settings import DEFAULTS, Settings, make_settings

PROFILES = {"model:npu": load_profile("ascend910b"), "model:cpu": load_profile("cpu")}
GRAPH = dataclasses.replace(mlp_step(32), meta={"steps_per_epoch": 100})   # as cell_graph sets it
HOST = HostWithModes(FakeHost(per_sample_s=2e-4, bytes_per_sample=150_528), fake_modes())
CPUS = 2


def real_signature(s: Settings, device: str) -> dict:
    """What the real target asks MindSpore for, observed: the calls `apply_context`, `apply_jit` and the
    step driver make (MindSpore's setters recorded instead of run), the calls `make_dataset` makes to
    `mindspore.dataset` (recorded: sources, maps, batch, config), the parallel plan with its
    `set_auto_parallel_context` call, what `build_train_step` builds (workloads/train_step.py), and msrun's world."""
    from workloads.registry import get_workload
    from workloads.train_step import amp_effective, scaled_lr

    return {
        "context": observed_context(s, device),
        "parallel": {"plan": asdict(plan_parallel(s)), "calls": observed_parallel_context(s)},
        "train_step": {"amp": amp_effective(s), "recompute": s.recompute, "optimizer": s.optimizer,
                       "lr_schedule": s.lr_schedule, "micro_batch": s.batch_size, "grad_accum": s.grad_accum,
                       "loss_scale": s.loss_scale, "grad_clip": s.grad_clip, "devices": s.devices, "seed": s.seed,
                       "lr": scaled_lr(get_workload("resnet50").preset("tiny"), s)},
        "dataset": observed_dataset(s),
        "msrun_world": s.devices,
    }


def described(value: object) -> object:
    """A recorded argument as comparable data: ops by class and device, callables and sources by type."""
    if isinstance(value, (list, tuple)):
        return [described(v) for v in value]
    if isinstance(value, dict):
        return {k: described(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = value.__qualname__ if isinstance(value, types.FunctionType) else type(value).__qualname__
    return (name, getattr(value, "device_target", None))


class RecordedDataset:
    """Stands for a mindspore.dataset object: records its construction and every chained call."""

    def __init__(self, calls: list, name: str, *args, **kwargs) -> None:
        self.calls = calls
        self.record(name, *args, **kwargs)

    def record(self, name: str, *args, **kwargs) -> "RecordedDataset":
        self.calls.append((name, described(list(args)), described(kwargs)))
        return self

    def map(self, *args, **kwargs):
        return self.record("map", *args, **kwargs)

    def batch(self, *args, **kwargs):
        return self.record("batch", *args, **kwargs)

    def project(self, *args, **kwargs):
        return self.record("project", *args, **kwargs)

    def repeat(self, *args, **kwargs):
        return self.record("repeat", *args, **kwargs)

    def create_tuple_iterator(self, *args, **kwargs):
        self.record("create_tuple_iterator", *args, **kwargs)
        return iter(())

    def get_dataset_size(self) -> int:
        return 32


def recorder(calls: list, name: str):
    def record(*args, **kwargs):
        calls.append((name, described(list(args)), described(kwargs)))
    return record


def observed_dataset(s: Settings) -> list:
    """The calls the resnet50/tiny training pipeline of rank 0 makes to mindspore.dataset, as `run_session`
    builds it (batch and shard from the parallel plan); a pipeline that refuses the settings says why."""
    import mindspore.dataset as ds

    from workloads import pipeline
    from workloads.registry import get_workload
    from workloads.train_step import step_batch_size

    workload = get_workload("resnet50")
    preset = workload.preset("tiny")
    parallel = plan_parallel(s)
    shard, shards = parallel.data_shard(0, s.devices)
    calls: list = []
    with pytest.MonkeyPatch.context() as mp:
        for name in ("GeneratorDataset", "MindDataset"):
            mp.setattr(ds, name, lambda *a, _name=name, **kw: RecordedDataset(calls, _name, *a, **kw))
        mp.setattr(ds, "DatasetCache", lambda **kw: ("DatasetCache", described(kw)))
        for name in ("set_prefetch_size", "set_seed", "set_enable_shared_mem"):
            mp.setattr(ds.config, name, recorder(calls, f"config.{name}"))
        mp.setattr(pipeline, "mindrecord_path", lambda spec, workdir: Path(workdir) / "train.mindrecord")  # not written
        mp.setenv(pipeline.CACHE_SESSION_ENV, "1")
        try:
            workload.make_dataset(preset, "train", s, parallel.loaded_batch(step_batch_size(preset, s)),
                                  rank=shard, world=shards, workdir=Path("unused"))
        except ValueError as err:
            calls.append(("refused", str(err)))
    return calls


class RecordedCell:
    def __init__(self, calls: list) -> None:
        self.set_jit_config = recorder(calls, "cell.set_jit_config")


def observed_context(s: Settings, device: str) -> list:
    """The calls `apply_context`, `apply_jit` and `step_driver` make to MindSpore for the cell's plan
    (hardware/mindspore/session.py's order), recorded instead of run, with the environment it updates."""
    import mindspore as ms

    from hardware.mindspore import backend
    from hardware.mindspore.session import step_driver

    plan = plan_context(s, device, threads=1)
    calls: list = []

    class Environ(dict):
        def update(self, *args, **kwargs) -> None:
            calls.append(("os.environ.update", described(dict(*args, **kwargs)), {}))

    with pytest.MonkeyPatch.context() as mp:
        for owner, name in ((ms, "set_device"), (ms, "set_context"), (ms.runtime, "set_memory"),
                            (ms.device_context.cpu.op_tuning, "threads_num"), (ms, "data_sink")):
            mp.setattr(owner, name, recorder(calls, name))
        mp.setattr(ms, "JitConfig", lambda **kw: ("JitConfig", described(kw)))
        mp.setattr(backend, "_op_threads", None)          # settable once per process: each cell is a new one
        mp.setattr(backend.os, "environ", Environ(os.environ))
        backend.apply_context(plan)
        cell = RecordedCell(calls)
        backend.apply_jit(cell, plan)
        step_driver(plan, cell, RecordedDataset(calls, "dataset"))
    return calls


def observed_parallel_context(s: Settings) -> list:
    """The `mindspore.set_auto_parallel_context` call of a data-parallel rank (hardware/mindspore/distributed.py)."""
    import mindspore as ms

    from workloads.parallel_plan import apply_context as apply_parallel_context

    calls: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ms, "set_auto_parallel_context", recorder(calls, "set_auto_parallel_context"))
        apply_parallel_context(plan_parallel(s))
    return calls


def model_signature(s: Settings, kind: str, facts: Facts) -> dict:
    """Every input of the device model for a cell: the op graph's key, fusion, the host-cost key, what the
    pure `predict` makes of the settings, and (with accuracy) the accuracy run's settings."""
    profile = PROFILES[kind]
    return {
        "graph_key": graph_key("resnet50", "tiny", {}, s),
        "fusion": compile_mode(s, profile).graph_kernel_fusion,
        "host_cost_entry": entry_key("resnet50", "tiny", {}, s.data_format),
        "prediction": predict(GRAPH, s, profile, HOST).to_dict(),
        "accuracy": accuracy_inputs(s) if facts.accuracy else None,
    }


def accuracy_inputs(s: Settings) -> object:
    try:
        return accuracy_settings(s).non_default()
    except ConfigError as err:   # e.g. devices=4096: 4096 accumulated micro-batches exceed grad_accum's range
        return f"impossible: {err}"


def kind_facts(kind: str, accuracy: bool) -> Facts:
    if kind in REAL_KINDS:
        return Facts(cpus=CPUS)
    profile = PROFILES[kind]
    return Facts(accuracy=accuracy, profile_sinks=profile.launch.supports_sink,
                 host_is_device=profile.host.shares_device, usable_gib=profile.memory.usable_gib,
                 fragmentation=profile.memory.fragmentation, flash_kernel=has_flash_kernel(profile))


def signature(s: Settings, kind: str, facts: Facts) -> dict:
    return real_signature(s, kind.split(":")[1]) if kind in REAL_KINDS else model_signature(s, kind, facts)


def walk(kind: str, facts: Facts):
    """(knob, context, value, settings or None when a settings rule forbids it) for every walked value."""
    for knob in DEFAULTS:
        for context in walk_contexts(knob):
            for value in walk_values(knob):
                if value == DEFAULTS[knob]:
                    continue
                try:
                    s = make_settings({**context, knob: value})
                except ConfigError:
                    s = None
                yield knob, context, value, s


CASES = [(kind, acc) for kind in REAL_KINDS for acc in (False,)] + [(k, acc) for k in MODEL_KINDS for acc in (False, True)]


@pytest.mark.parametrize("kind,accuracy", CASES)
def test_every_knob_value_changes_a_call_or_a_model_input_or_is_refused(kind, accuracy):
    facts = kind_facts(kind, accuracy)
    silent = []
    for knob, context, value, s in walk(kind, facts):
        if s is None or refusal(s, kind, facts):
            continue
        base = make_settings(dict(context))
        if signature(s, kind, facts) == signature(base, kind, facts):
            silent.append(f"{knob}={value!r} in {dict(context)}")
    assert not silent, f"{kind}: values that change nothing and are not refused: {silent}"


def test_the_table_covers_every_knob_and_kind_and_every_refusal_can_fire():
    assert list(EFFECTS) == list(DEFAULTS)
    assert all(set(EFFECTS[k]) == set(KINDS) for k in EFFECTS)
    fired = set()
    for kind, accuracy in CASES:
        facts = kind_facts(kind, accuracy)
        for _knob, _ctx, _value, s in walk(kind, facts):
            for i, r in enumerate(REFUSALS):
                if s is not None and kind in r.kinds and r.when(s, facts):
                    fired.add(i)
    recompute = next(i for i, r in enumerate(REFUSALS) if r.knob == "recompute")
    assert refusal(make_settings({"recompute": "full"}), "model:npu", Facts(marked_blocks=0)).startswith("recompute=full")
    assert refusal(make_settings({"recompute": "full"}), "model:npu", Facts(marked_blocks=3)) is None
    fired.add(recompute)
    for knob, value, refusing in (("augment_device", "ascend", Facts(device_vision_ops=False)),
                                  ("drop_remainder", False, Facts(ragged_last_batch=False))):
        settings = make_settings({knob: value})
        assert refusal(settings, "mindspore:ascend", refusing).startswith(f"{knob}=")
        assert refusal(settings, "mindspore:ascend", Facts()) is None
        fired |= {i for i, r in enumerate(REFUSALS) if r.knob == knob and r.when(settings, refusing)}
    fired |= llm_composition_refusals_fired()
    assert fired == set(range(len(REFUSALS)))


LLM_HOST_VALUES = {"mode": "pynative", "sink": False, "graph_kernel": True, "sink_size": 4, "workers": 8,
                   "prefetch": 0, "data_format": "mindrecord", "python_multiprocessing": True,
                   "shared_mem": False, "augment_device": "ascend", "drop_remainder": False,
                   "memory_optimize_level": "O1", "max_device_memory": 16.0, "grad_clip": "norm"}


def llm_composition_refusals_fired() -> set[int]:
    """The composed LLM step refuses the host-side knobs it does not cost (they would be silent there)."""
    composed, plain = Facts(llm_composition=True), Facts()
    graph_sink = {"mode": "graph", "sink": True}
    fired = set()
    for knob, value in LLM_HOST_VALUES.items():
        extra = {"shared_mem": {"python_multiprocessing": True}, "mode": {"sink": False}}.get(knob, {})
        base = make_settings(graph_sink if knob == "mode" else {**graph_sink, **extra})
        changed = make_settings({**graph_sink, **extra, knob: value})
        if knob != "shared_mem":     # its context (process workers) is itself refused there
            assert refusal(base, "model:npu", composed) is None, knob
            assert refusal(changed, "model:npu", composed).startswith(f"{knob}="), knob
        assert refusal(changed, "model:npu", plain) is None or knob == "augment_device", knob
        fired |= {i for i, r in enumerate(REFUSALS) if r.knob == knob and r.when(changed, composed)}
    return fired


def test_cache_keys_read_the_table():
    assert set(GRAPH_KNOBS) == set(graph_knobs()) == {"amp_level", "keep_batchnorm_fp32", "recompute", "batch_size",
                                                      "grad_accum", "optimizer", "loss_scale", "lr_schedule", "grad_clip"}
    assert NUMERICS_KNOBS == NUMERICS and "recompute" not in NUMERICS and "seed" in NUMERICS


def test_knob_subsets_derive_from_the_table():
    # The sets these tuples held when they were written by hand (main at 9979734), in Settings order: a
    # change to the table that moves a knob in or out of one must change this test too.
    assert NUMERICS == ("amp_level", "loss_scale", "keep_batchnorm_fp32", "batch_size", "grad_accum", "optimizer",
                        "lr_schedule", "grad_clip", "seed", "lr_scaling")
    assert INFERENCE_KNOBS == ("mode", "jit_level", "graph_kernel", "amp_level", "keep_batchnorm_fp32",
                               "batch_size", "seed")
    assert NUMERICS == knobs_changing(NUMBERS) and INFERENCE_KNOBS == knobs_changing(FORWARD)


@pytest.mark.parametrize("knob,value,kind,context,status,fragment", [
    ("cache", True, "model:npu", {"data_format": "mindrecord"}, "refused", "no dataset-cache input"),
    ("prefetch", 1, "model:npu", {}, "refused", "only whether batches are prefetched"),
    ("prefetch", 0, "model:npu", {}, "modelled", "overlaps"),
    ("prefetch", 0, "mindspore:cpu", {}, "refused", "at least one batch"),
    ("keep_batchnorm_fp32", True, "mindspore:cpu", {"amp_level": "O1"}, "refused", "invalid"),
    ("keep_batchnorm_fp32", False, "model:npu", {"amp_level": "O2"}, "modelled", "op graph"),
    ("jit_level", "O1", "model:cpu", {"mode": "graph"}, "refused", "does no fusion"),
    ("jit_level", "O1", "model:npu", {"mode": "graph"}, "modelled", "fusion"),
    ("jit_level", "O2", "mindspore:gpu", {"mode": "graph"}, "refused", "GE"),
    ("jit_level", "O2", "mindspore:ascend", {"mode": "graph"}, "applied", "JitConfig"),
    ("sink", True, "model:cpu", {"mode": "graph"}, "modelled", "round trip"),
])
def test_capability_of_the_silent_knobs_of_issue_13(knob, value, kind, context, status, fragment):
    facts = Facts(host_is_device=kind == "model:cpu", profile_sinks=kind != "model:cpu") if kind in MODEL_KINDS \
        else Facts(cpus=CPUS)
    cap = capability(knob, value, kind, context, facts)
    if kind == "model:cpu" and knob == "sink":
        status, fragment = "refused", "not available"
    assert cap.status == status and fragment in cap.text


def test_targets_refuse_through_the_table():
    assert unsupported_reason(make_settings({"mode": "graph", "jit_level": "O2"}), "gpu", device_check=False) == \
        refusal(make_settings({"mode": "graph", "jit_level": "O2"}), "mindspore:gpu", Facts())
    cpu_model, npu_model = ModelTarget("cpu"), ModelTarget("ascend910b")
    from msbench.cell import Cell

    def cell(**knobs):
        return Cell(workload="resnet50", settings=make_settings(knobs))
    assert "does no fusion" in cpu_model.supports(cell(mode="graph", jit_level="O1"))
    assert npu_model.supports(cell(mode="graph", jit_level="O1")) is None
    assert "no dataset-cache input" in npu_model.supports(cell(data_format="mindrecord", cache=True))
    assert "predictions do not depend on the seed" in npu_model.supports(cell(seed=7))
    assert ModelTarget("ascend910b", accuracy=True).supports(cell(seed=7)) is None
    assert "not available" in cpu_model.supports(cell(mode="graph", sink=True))


def test_predict_refuses_a_knob_the_model_does_not_read(capsys):
    from msbench.cli import main

    code = main(["predict", "resnet50", "--hardware", "ascend910b", "--set", "prefetch=4"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "prefetch=4: the device model reads only" in err


def test_the_model_refuses_recompute_when_the_extracted_step_marked_no_block(monkeypatch):
    """Known once the graph is extracted (as on the real target once the step is built)."""
    from hardware.model import outcome
    from msbench.cell import Cell

    profile = PROFILES["model:npu"]

    def fake_model_prediction(plan, marked=0):
        graph = dataclasses.replace(GRAPH, meta={**GRAPH.meta, "recomputed_blocks": marked})
        return outcome.CellPrediction(predict(graph, plan.settings, profile, HOST), graph, profile, HOST)

    monkeypatch.setattr(outcome, "model_prediction", fake_model_prediction)
    cell = Cell(workload="resnet50", settings=make_settings({"recompute": "selective"}))
    record = ModelTarget("ascend910b").run(cell)
    assert record.status == "unsupported" and "marks no blocks to recompute" in record.reason
    monkeypatch.setattr(outcome, "model_prediction", lambda plan: fake_model_prediction(plan, marked=4))
    assert ModelTarget("ascend910b").run(cell).status == "ok"


def test_an_accuracy_run_the_tiny_preset_cannot_express_leaves_a_reason():
    """4096 data-parallel devices would be 4096 accumulated micro-batches (grad_accum allows 1024)."""
    from hardware.mindspore.target import add_accuracy
    from msbench.cell import Cell
    from msbench.records import Record

    record = Record(cell=Cell(workload="resnet50", settings=make_settings({"devices": 4096})), status="ok")
    add_accuracy(record)
    assert record.metrics.accuracy is None
    assert "accuracy run impossible: grad_accum=4096" in record.metrics.extra["accuracy_run"]["reason"]
