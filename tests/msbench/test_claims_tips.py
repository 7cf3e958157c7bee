"""The data-pipeline and memory tip claims (msbench/report/claims_tips.py), read from cell pairs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_fixtures import bd, record  # noqa: E402

from msbench.report.claims import FAILS, HOLDS, NO_DATA, PARTLY, evaluate_claims, summarize, thresholds_table  # noqa: E402
from msbench.report.load import RecordSet  # noqa: E402

TIPS = ("python_multiprocessing", "shared_mem", "augment_device", "drop_remainder", "memory_reuse")


def verdicts(records):
    return {r.claim.key: r for r in evaluate_claims(RecordSet.of(records).frame) if r.claim.key in TIPS}


@pytest.mark.slow
def test_each_tip_claim_reads_its_pair():
    got = verdicts([
        record(thr=1000, peak_gib=20, breakdown=bd(0.025)),
        record(thr=1100, peak_gib=20, breakdown=bd(0.025), python_multiprocessing=True),
        record(thr=1000, peak_gib=20, breakdown=bd(0.025), python_multiprocessing=True, shared_mem=False),
        record(thr=1000, peak_gib=20, breakdown=bd(0.025), augment_device="ascend"),
        record(thr=990, peak_gib=20, breakdown=bd(0.025), batch_size=48),
        record(thr=960, peak_gib=20, breakdown=bd(0.025), batch_size=48, drop_remainder=False),
        record(thr=1000, peak_gib=19.8, breakdown=bd(0.025), memory_optimize_level="O1"),
    ])
    assert {k: got[k].verdict for k in TIPS} == {"python_multiprocessing": HOLDS, "shared_mem": HOLDS,
                                                 "augment_device": PARTLY, "drop_remainder": HOLDS,
                                                 "memory_reuse": PARTLY}
    assert got["shared_mem"].evidence[0].values["speedup"] == pytest.approx(1.1)
    assert got["drop_remainder"].evidence[0].values["throughput_cost"] == pytest.approx(1 - 960 / 990)
    assert got["memory_reuse"].evidence[0].values["memory_ratio"] == pytest.approx(0.99)


@pytest.mark.slow
def test_a_tip_without_its_pair_has_no_data_and_a_slower_change_fails():
    got = verdicts([record(thr=1000, breakdown=bd(0.025)),
                    record(thr=800, breakdown=bd(0.025), python_multiprocessing=True)])
    assert got["python_multiprocessing"].verdict == FAILS and got["augment_device"].verdict == NO_DATA


def cap_result(records):
    (result,) = [r for r in evaluate_claims(RecordSet.of(records).frame) if r.claim.key == "max_device_memory"]
    return result


@pytest.mark.slow
def test_the_pool_cap_claim_states_the_largest_batch_that_fits_and_the_first_oom():
    oom = {"status": "oom", "reason": "predicted peak exceeds the cap"}
    result = cap_result([
        record(thr=900, peak_gib=6, batch_size=64), record(thr=1000, peak_gib=12, batch_size=128),
        record(thr=1050, peak_gib=24, batch_size=256),
        record(thr=900, peak_gib=6, batch_size=64, max_device_memory=10.0),
        record(peak_gib=12, batch_size=128, max_device_memory=10.0, **oom),
        record(peak_gib=24, batch_size=256, max_device_memory=10.0, **oom),
    ])
    assert result.verdict == HOLDS
    (evidence,) = result.evidence
    assert evidence.values == {"cap_gib": 10.0, "largest_fitting_batch": 64, "first_oom_batch": 128,
                               "batch_kept": pytest.approx(0.25)}
    assert len(evidence.cells) == 6                       # the capped sweep, then the uncapped cells
    assert "cap 10 GiB, largest batch that fits 64, first OOM batch 128" in summarize(result)


@pytest.mark.slow
def test_a_cap_that_never_bites_does_not_hold_and_a_lone_capped_cell_is_no_evidence():
    result = cap_result([
        record(thr=900, batch_size=64), record(thr=1000, batch_size=128),
        record(thr=900, batch_size=64, max_device_memory=40.0), record(thr=1000, batch_size=128, max_device_memory=40.0),
    ])
    assert result.verdict == FAILS
    assert result.evidence[0].values["first_oom_batch"] is None and result.evidence[0].values["batch_kept"] == 1.0
    assert cap_result([record(thr=900, batch_size=64), record(thr=900, batch_size=64, max_device_memory=8.0)]
                      ).verdict == NO_DATA


def test_the_stated_numbers_are_not_graded():
    rules = thresholds_table()
    mine = rules[rules["claim"] == "max_device_memory"]["check"].tolist()
    assert "first OOM batch: stated, not graded" in mine and any(r.startswith("largest batch under the cap") for r in mine)
