"""Verdict robustness: real predict() on small hand-built graphs, each estimate at the ends of its range."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))

from model_graphs import FakeHost, mlp_step  # noqa: E402
from hardware.model.graph import GraphNotCached
from hardware.model.predict import predict
from hardware.model.profile import load_profile, with_estimate
from hardware.model.target import prediction_metrics
from msbench.cell import Cell
from msbench.records import Record
from msbench.report import claims, uncertainty
from msbench.report.load import RecordSet
from msbench.settings import make_settings

# The graph-mode claim (graph over PyNative, holds at a speed-up >= 1.05) on two MLP steps: on the 910A a
# launch-bound batch 16, faster in graph mode at every estimate's range end; on the 910B a compute-bound
# batch 4096, whose 1.05x margin is gone when PyNative dispatch is at the low end of its range.
BATCH = {"model:ascend910a": 16, "model:ascend910b": 4096}


def inputs(record: Record, profile):
    return mlp_step(BATCH[record.cell.target]), FakeHost()


def model_record(target: str, mode: str) -> Record:
    settings = make_settings({"mode": mode})
    cell = Cell(workload="mlp", preset="full", settings=settings, target=target, label="base" if mode == "graph" else mode)
    pred = predict(mlp_step(BATCH[target]), settings, load_profile(target.split(":")[1]), FakeHost())
    return Record(cell=cell, status="ok", metrics=prediction_metrics(pred.to_dict()),
                  provenance={"commit": "c" * 40}, started_at=1.0)


@pytest.fixture(scope="module")
def found():
    records = [model_record(t, m) for t in BATCH for m in ("graph", "pynative")]
    return uncertainty.robustness(RecordSet.of(records), inputs), records


@pytest.mark.slow
def test_a_verdict_that_flips_at_a_range_end_is_uncertain_and_names_the_constant(found):
    result, records = found
    b = result[("graph_mode", "model:ascend910b")]
    assert b.text == "uncertain — depends on launch.pynative_us (25–150)"
    (flip,) = b.flips
    assert (flip.value, flip.shipped, flip.verdict) == (25.0, claims.HOLDS, claims.PARTLY)
    # the flip is real: the recorded speed-up holds, and at 25 us per PyNative op it is under 1.05x
    shown = {r.claim.key: r.verdict for r in claims.evaluate_claims(RecordSet.of(records).frame)
             if r.target == "model:ascend910b"}
    assert shown["graph_mode"] == claims.HOLDS
    # the re-judgement that reuses the pairing agrees with judging from scratch
    low = with_estimate(load_profile("ascend910b"), "launch.pynative_us", 25.0)
    moved = [uncertainty.repredicted(r, *inputs(r, low), low) for r in records if r.cell.target == "model:ascend910b"]
    assert uncertainty.judge(moved, "model:ascend910b").verdicts["graph_mode"] == claims.PARTLY
    table = uncertainty.flips_table(result)
    assert table[["claim", "constant", "at", "verdict there"]].values.tolist() == \
        [["graph_mode", "launch.pynative_us", "25", claims.PARTLY]]


@pytest.mark.slow
def test_a_verdict_that_survives_every_range_end_is_robust(found):
    result, records = found
    a = result[("graph_mode", "model:ascend910a")]
    assert a.text == uncertainty.ROBUST and a.flips == ()
    read = set(uncertainty.estimates_read(records[0]))
    assert {"launch.graph_o0_us", "launch.step_us"} <= read     # it was varied, and held
    assert result[("sink", "model:ascend910a")].text == ""       # no cells: nothing to judge


@pytest.mark.slow
def test_stale_records_and_missing_graphs_are_said_not_checked(found, tmp_path, monkeypatch):
    _, records = found
    b_records = [r for r in records if r.cell.target == "model:ascend910b"]
    # PyNative recorded as fast as graph mode: not what the model predicts now
    off = [b_records[0], Record(cell=b_records[1].cell, status="ok", provenance=b_records[1].provenance,
                                metrics=b_records[0].metrics)]
    stale = uncertainty.robustness(RecordSet.of(off), inputs)[("graph_mode", "model:ascend910b")]
    assert stale.text.startswith("not checked: the records are stale")
    # the report's own lookup never compiles: an empty cache is said, not filled
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    cells = [Cell(workload="resnet50", preset="tiny", settings=make_settings({"mode": m}), target="model:ascend910b",
                  label=m) for m in ("graph", "pynative")]
    with pytest.raises(GraphNotCached):
        uncertainty.cached_inputs(Record(cell=cells[0], status="ok"), load_profile("ascend910b"))
    unseen = [Record(cell=c, status="ok", metrics=r.metrics, provenance=r.provenance) for c, r in zip(cells, b_records)]
    missing = uncertainty.robustness(RecordSet.of(unseen))
    assert missing[("graph_mode", "model:ascend910b")].text.startswith("not checked: no cached graph of resnet50")
    assert missing[("sink", "model:ascend910b")].text == ""        # no cells: nothing to check
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.slow
def test_a_targets_robustness_is_cached_by_content(found, private_cache, monkeypatch):
    _, records = found
    calls = []
    real = uncertainty.target_robustness

    def counted(recs, target, lookup):
        calls.append(target)
        return real(recs, target, lookup)

    monkeypatch.setattr(uncertainty, "cached_inputs", inputs)
    monkeypatch.setattr(uncertainty, "target_robustness", counted)
    now = RecordSet.of(records)
    first = uncertainty.robustness(now)
    second = uncertainty.robustness(now)
    assert sorted(calls) == ["model:ascend910a", "model:ascend910b"]          # the second call computed nothing
    assert first == second and first[("graph_mode", "model:ascend910b")].flips[0].estimate.key == "launch.pynative_us"
    changed = RecordSet.of([records[0], records[1], records[2]])     # the 910B's records changed, the 910A's not
    uncertainty.robustness(changed)
    assert calls[2:] == ["model:ascend910b"]


@pytest.mark.slow
def test_a_tip_verdict_that_hangs_on_a_tip_estimate_says_so():
    """SOMAS' packing loss (tips.somas_packing_loss, 0-1) is varied like a profile's own estimates: at 1
    the plan packs no better than the pool, and memory reuse no longer saves memory."""
    target, profile = "model:ascend910b", load_profile("ascend910b")

    def reuse_record(level: str) -> Record:
        settings = make_settings({"mode": "graph", "memory_optimize_level": level})
        cell = Cell(workload="mlp", preset="full", settings=settings, target=target,
                    label="base" if level == "O0" else f"memory_optimize_level={level}")
        pred = predict(mlp_step(BATCH[target]), settings, profile, FakeHost())
        return Record(cell=cell, status="ok", metrics=prediction_metrics(pred.to_dict()),
                      provenance={"commit": "c" * 40}, started_at=1.0)

    records = [reuse_record("O0"), reuse_record("O1")]
    assert "tips.somas_packing_loss" in uncertainty.estimates_read(records[1])
    result = uncertainty.robustness(RecordSet.of(records), inputs)[("memory_reuse", target)]
    assert result.text == "uncertain — depends on tips.somas_packing_loss (0–1)"
    (flip,) = result.flips
    assert flip.value == 1.0 and flip.shipped == claims.HOLDS and flip.verdict != claims.HOLDS
    assert "SOMAS" in flip.estimate.reason


def test_the_report_predicts_a_tip_cell_again_with_its_pipelines_calibrated_modes(monkeypatch):
    """A cell with a tip knob that reads hardware/calibration/pipeline_modes.json gets the same host as the
    device-model target gives it, or its re-prediction could not apply the knob."""
    from hardware.model import target as model_target
    from hardware.model.pipeline_modes import modes_of

    monkeypatch.setattr(model_target, "cell_graph", lambda *args, **kwargs: mlp_step(16))
    profile = load_profile("ascend910b")

    def host_of(**knobs):
        cell = Cell(workload="resnet50", preset="full", settings=make_settings({"mode": "graph", **knobs}),
                    target="model:ascend910b", label="x")
        return uncertainty.cached_inputs(Record(cell=cell, status="ok"), profile)[1]

    assert modes_of(host_of(python_multiprocessing=True)) is not None and modes_of(host_of()) is None
