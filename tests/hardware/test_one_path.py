"""Every command that predicts a device-model cell goes through one path (hardware/model/outcome.py):
`msbench run`, `msbench predict`, `msbench validate` (published and CPU) and the report give the same
status and figures for the same cell, refusals included."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from msbench.commands.predict import cell_prediction
from hardware.model.outcome import ModelRefusal, prediction_metrics
from hardware.model.predict import canonical
from hardware.model.target import ModelTarget
from hardware.validation.cpu import compare
from hardware.validation.report import model_predictor, predict_case
from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.report.load import RecordSet
from msbench.settings import make_settings

PROFILE = "ascend910b"
LLM = {"mode": "graph", "sink": True, "optimizer": "adamw", "batch_size": 2, "devices": 4,
       "parallel_mode": "semi_auto", "tensor_parallel": 2}
CELLS = {
    "llm composition": Cell(workload="llama2-7b", settings=make_settings(LLM), target=f"model:{PROFILE}"),
    "data-bound cnn": Cell(workload="resnet50", settings=make_settings({"mode": "graph", "sink": True, "workers": 1}),
                           target=f"model:{PROFILE}"),
    "inference": Cell(workload="resnet50", settings=make_settings({"mode": "graph"}), target=f"model:{PROFILE}",
                      scenario="inference"),
}
# drop_remainder=false is refused once the graph is extracted: the tiny split leaves no ragged batch
REFUSED_AFTER_EXTRACTION = Cell(workload="resnet50", settings=make_settings({"mode": "graph", "drop_remainder": False}),
                                target=f"model:{PROFILE}")


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """The slow tests' shared cache (tests/conftest.py), from a scratch directory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("one-path"))
        yield


def published_case(cell: Cell) -> SimpleNamespace:
    return SimpleNamespace(id="case", workload=cell.workload, preset=cell.preset, overrides=cell.overrides,
                           settings=cell.settings, profile=PROFILE, chip="910B", mindspore="2.10", unit="s/step",
                           figure=1.0, published_step_s=1.0, fits=None, assumed=(), in_unit=lambda s: s)


def figures(metrics: Metrics) -> dict:
    return {k: getattr(metrics, k) for k in ("step_time_s", "throughput", "throughput_per_device",
                                              "peak_memory_bytes", "oom", "bound", "mfu", "breakdown")}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CELLS))
def test_run_predict_validate_and_report_agree(model_cache, name):
    cell = CELLS[name]
    record = ModelTarget(PROFILE).run(cell)
    assert record.status == "ok"
    if name == "data-bound cnn":
        assert record.metrics.bound == "data"
    # msbench predict: its JSON carries the same figures
    _, text = cell_prediction(cell)
    assert figures(prediction_metrics(json.loads(text))) == figures(record.metrics)
    # msbench validate --profile ascend910b (a published case with the cell's settings)
    if cell.scenario == "train":
        row = predict_case(published_case(cell), model_predictor)
        assert row.failed is None and canonical(row.predicted_step_s) == record.metrics.step_time_s
        assert row.bound == record.metrics.bound and row.oom == record.metrics.oom
    # msbench validate --profile cpu compares a measured record with the same prediction
    measured = Record(cell=cell.with_target("mindspore:cpu"), status="ok",
                      metrics=Metrics(step_time_s=1.0, peak_memory_bytes=1))
    if cell.scenario == "train":
        assert canonical(compare(measured, PROFILE).predicted_step_s) == record.metrics.step_time_s
    # the report reads the record as written
    row = RecordSet.of([record]).frame.iloc[0]
    assert row["throughput"] == record.metrics.throughput and row["status"] == record.status


@pytest.mark.slow
def test_a_cell_refused_after_extraction_is_refused_by_every_path(model_cache):
    cell = REFUSED_AFTER_EXTRACTION
    record = ModelTarget(PROFILE).run(cell)
    assert record.status == "unsupported" and record.reason.startswith("drop_remainder=false")
    with pytest.raises(ModelRefusal, match="drop_remainder=false"):
        cell_prediction(cell)
    row = predict_case(published_case(cell), model_predictor)
    assert row.predicted_step_s is None and record.reason[:40] in row.failed
    with pytest.raises(ModelRefusal, match="drop_remainder=false"):
        compare(Record(cell=cell, status="ok", metrics=Metrics(step_time_s=1.0)), PROFILE)


@pytest.mark.slow
def test_a_device_side_range_end_recosts_only_what_it_changes_as_a_full_recost_would(model_cache):
    """estimate_ends costs again only the kernels of the class whose table or unaligned factor an end changes,
    and nothing for an end of a memory size: the same kernels as costing the whole step on the varied profile."""
    from hardware.model.compute import kernels
    from hardware.model.estimate_ends import DEVICE_SECTIONS, ShippedStep, ends_kernels
    from hardware.model.lowering import lower
    from hardware.model.outcome import model_prediction
    from hardware.model.plan import resolve
    from hardware.model.profile import with_estimate

    plan = resolve(CELLS["data-bound cnn"], PROFILE)
    result = model_prediction(plan)
    ops = lower(result.graph, plan.settings, plan.profile).ops
    step = ShippedStep.of(ops, plan.profile)
    varied_keys = [e for e in plan.profile.estimates if e.key.partition(".")[0] in DEVICE_SECTIONS]
    assert {"kernel_classes.unaligned_reduction", "memory.workspace_mib", "memory.gbps"} <= {e.key for e in varied_keys}
    for estimate in varied_keys:
        for value in (estimate.low, estimate.high):
            varied = with_estimate(plan.profile, estimate.key, value)
            assert ends_kernels(step, plan.profile, varied, estimate.key, {}) == kernels(ops, varied), estimate.key
