"""Report tables against the records they came from (knob effects, trade-offs, best settings, claims)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import GIB, bd, claims_records, record  # noqa: E402

from msbench.report.best import best_settings  # noqa: E402
from msbench.report.claims import FAILS, HOLDS, NO_DATA, PARTLY, Check, evaluate_claims  # noqa: E402
from msbench.report.effects import knob_effects  # noqa: E402
from msbench.report.load import RecordSet  # noqa: E402
from msbench.report.tradeoffs import pareto_mask, tradeoffs  # noqa: E402


@pytest.fixture(scope="module")
def runs() -> RecordSet:
    return RecordSet.of(claims_records() + claims_records("model:ascend910a", scale=0.5))


def by_label(table, label, target="model:ascend910b"):
    rows = table[(table["label"] == label) & (table["target"] == target)]
    assert len(rows) == 1, (label, target)
    return rows.iloc[0]


def test_effects_match_the_records(runs):
    table, notes = knob_effects(runs.frame)
    records = {(r.cell.target, r.cell.label): r for r in runs.records}
    for target in ("model:ascend910b", "model:ascend910a"):
        base = records[(target, "base")].metrics
        for label in ("amp_level=O2", "workers=1", "recompute=selective", "devices=8"):
            row, m = by_label(table, label, target), records[(target, label)].metrics
            assert row["speedup"] == pytest.approx(m.throughput / base.throughput)
            assert row["memory_change_pct"] == pytest.approx((m.peak_memory_bytes / base.peak_memory_bytes - 1) * 100)
            assert row["accuracy_delta_pp"] == pytest.approx((m.accuracy - base.accuracy) * 100)
            assert row["cell_id"] == records[(target, label)].cell_id
    amp = by_label(table, "amp_level=O2")
    assert (amp["moved"], amp["moved_ms"]) == ("compute", pytest.approx(-13.0))
    assert by_label(table, "workers=1")["moved"] == "data"
    assert by_label(table, "mode=pynative")["moved"] == "host"
    oom = by_label(table, "batch_size=512")
    assert oom["status"].startswith("oom") and np.isnan(oom["speedup"])
    assert notes == []


def test_runner_delta_is_preferred_and_missing_base_is_said():
    base = record(thr=100, peak_gib=1, acc=0.5)
    other = record(thr=150, peak_gib=1, acc=0.9, amp_level="O2")
    other.metrics.accuracy_delta_pp = -0.25
    table, _ = knob_effects(RecordSet.of([base, other]).frame)
    assert table.iloc[0]["accuracy_delta_pp"] == -0.25
    failed = record(status="failed", reason="boom")
    table, notes = knob_effects(RecordSet.of([failed, other]).frame)
    assert table.empty and "baseline cell is failed" in notes[0]


def test_pareto_mask_by_hand():
    thr = np.array([10.0, 8.0, 12.0, 9.0, 20.0])
    mem = np.array([5.0, 4.0, 6.0, 7.0, 3.0])
    admissible = np.array([True, True, True, True, False])
    # 20@3 is inadmissible (accuracy), so it dominates nobody; 9@7 is dominated by 10@5 and 12@6.
    assert pareto_mask(thr, mem, admissible).tolist() == [True, True, True, False, False]


def test_tradeoffs_mark_pareto_and_tolerance(runs):
    table, notes = tradeoffs(runs.frame, tolerance_pp=0.2)
    front = set(table[(table["target"] == "model:ascend910b") & table["pareto"]]["label"])
    # amp O2 (1800/s at 11 GiB) loses 0.3 pp > 0.2 pp: over the tolerance, so it leaves the front.
    assert by_label(table, "amp_level=O2")["over_tolerance"]
    assert front == {"devices=8", "graph_kernel=true", "recompute=selective"}
    assert by_label(table, "base")["peak_gib"] == pytest.approx(20.0)
    assert len(notes) == 2 and "1 of 11" in notes[0]


def test_best_under_cap_and_tolerance(runs):
    table, _ = best_settings(runs.frame, memory_cap_gib=None, tolerance_pp=1.0)
    assert by_label(table, "devices=8")["throughput"] == 7000
    table, _ = best_settings(runs.frame, memory_cap_gib=15, tolerance_pp=1.0)
    row = by_label(table, "amp_level=O2")
    assert row["speedup"] == pytest.approx(1.8) and row["peak_gib"] == pytest.approx(11.0)
    table, notes = best_settings(runs.frame, memory_cap_gib=15, tolerance_pp=0.1)
    assert by_label(table, "recompute=selective")["throughput"] == 850
    table, notes = best_settings(runs.frame, memory_cap_gib=1, tolerance_pp=1.0)
    assert table.empty and "no ok cell fits 1 GiB" in notes[0]


def verdicts(frame):
    return {(r.claim.key, r.target): r for r in evaluate_claims(frame)}


@pytest.mark.slow
def test_claims_verdicts_and_numbers(runs):
    got = verdicts(runs.frame)
    expected = {"amp": HOLDS, "graph_mode": HOLDS, "graph_kernel": HOLDS, "sink": PARTLY,
                "data_pipeline": HOLDS, "recompute": HOLDS, "grad_accum": HOLDS, "data_parallel": PARTLY}
    for target in ("model:ascend910a", "model:ascend910b"):
        assert {k: got[(k, target)].verdict for k in expected} == expected
    amp = got[("amp", "model:ascend910b")].evidence[0]
    assert amp.values["speedup"] == pytest.approx(1.8)
    assert amp.values["memory_ratio"] == pytest.approx(11 / 20, rel=1e-6)
    assert amp.values["accuracy_loss_pp"] == pytest.approx(0.3)
    ga = got[("grad_accum", "model:ascend910b")].evidence[0]
    assert ga.labels == ("base", "grad_accum=4", "batch_size=128")
    assert ga.values["accuracy_shortfall_pp"] == pytest.approx(0.3)      # large 70.5 % - accumulated 70.2 %
    dp = got[("data_parallel", "model:ascend910a")].evidence[0]
    assert dp.values["efficiency"] == pytest.approx(7000 / 8000)
    pipe = got[("data_pipeline", "model:ascend910b")].evidence[0]
    assert pipe.values["throughput_lost"] == pytest.approx(0.65)
    assert pipe.values["data_share_after"] == pytest.approx(0.001 / (32 / 1000))


@pytest.mark.slow
def test_claim_fails_and_missing_accuracy_caps_at_partly():
    slow_amp = [record(thr=100, peak_gib=10, breakdown=bd(0.02)),
                record(thr=90, peak_gib=10, breakdown=bd(0.02), amp_level="O3")]
    got = verdicts(RecordSet.of(slow_amp).frame)
    assert got[("amp", "model:ascend910b")].verdict == FAILS
    fast_amp = [record(thr=100, peak_gib=10), record(thr=200, peak_gib=5, amp_level="O3")]
    got = verdicts(RecordSet.of(fast_amp).frame)
    assert got[("amp", "model:ascend910b")].verdict == PARTLY      # accuracy not measured
    assert got[("sink", "model:ascend910b")].verdict == NO_DATA


def test_check_grades_both_directions():
    up = Check("x", "x", holds=1.5, partly=1.05)
    down = Check("y", "y", holds=0.6, partly=0.9, higher_is_better=False)
    assert [up.grade(v) for v in (1.6, 1.5, 1.1, 1.0, None)] == [2, 2, 1, 0, None]
    assert [down.grade(v) for v in (0.5, 0.6, 0.8, 0.95)] == [2, 2, 1, 0]


def test_one_record_per_cell_and_commit_latest_wins():
    old = record(thr=100, peak_gib=1, started=1.0)
    new = record(thr=120, peak_gib=1, started=2.0)
    runs = RecordSet.of([new, old])
    assert len(runs.records) == 1 and runs.frame.iloc[0]["throughput"] == 120
    assert runs.frame.iloc[0]["peak_memory_bytes"] == GIB


def test_device_model_breakdown_becomes_the_five_components():
    """The model's breakdown is by phase; its compute/memory split sits in extra.detail."""
    base = record(thr=100, peak_gib=1)
    fused = record(thr=125, peak_gib=1, graph_kernel=True)
    for rec, (compute, memory, dispatch) in ((base, (0.20, 0.10, 0.02)), (fused, (0.19, 0.04, 0.01))):
        rec.metrics.breakdown = {"forward": 0.1, "backward": 0.2, "optimizer": 0.0, "recompute": 0.0,
                                 "dispatch": dispatch, "roundtrip": 0.001, "transfer": 0.0, "comm": 0.0, "data": 0.0}
        rec.metrics.extra = {"detail": {"compute_bound_s": compute, "memory_bound_s": memory}}
    runs = RecordSet.of([base, fused])
    row = runs.frame[runs.frame["label"] == "base"].iloc[0]
    assert row["component.compute"] == 0.20 and row["component.host"] == pytest.approx(0.021)
    table, _ = knob_effects(runs.frame)
    assert table.iloc[0]["moved"] == "memory" and table.iloc[0]["moved_ms"] == pytest.approx(-60.0)


def test_a_traceback_reason_is_shown_by_its_last_line():
    base = record(thr=100, peak_gib=1)
    crashed = record(status="failed", reason="Traceback (most recent call last):\n  File x\nRuntimeError: boom",
                     amp_level="O2")
    table, _ = knob_effects(RecordSet.of([base, crashed]).frame)
    assert table.iloc[0]["status"] == "failed: RuntimeError: boom"


def test_measured_conditions_are_tabled_and_mixed_ones_flagged():
    from msbench.cell import Cell
    from msbench.records import Metrics, Record
    from msbench.report.build import conditions_table
    from msbench.settings import Settings

    def rec(label, load, others):
        cell = Cell(workload="resnet50", preset="tiny", settings=Settings(seed=len(label)), label=label,
                    target="mindspore:cpu")
        return Record(cell=cell, status="ok", metrics=Metrics(extra={"conditions": {
            "cores": 2, "load_before": [load, load, load], "others_during": others, "steal_during": 0.0}}))

    model = Record(cell=Cell(workload="resnet50", preset="tiny", settings=Settings(), target="model:cpu"),
                   status="ok")
    table, why = conditions_table([rec("base", 0.2, 0.05), rec("x", 0.3, 0.1), model])
    assert len(table) == 2 and why is None and set(table["overloaded"]) == {""}
    table, why = conditions_table([rec("base", 0.2, 0.05), rec("xyz", 4.0, 0.9)])
    assert "resnet50 xyz against resnet50 base: one ran overloaded (others kept 1.80 of 2 cores busy (> 50%))" in why
    assert table.loc[1, "overloaded"] == "others kept 1.80 of 2 cores busy (> 50%)"
