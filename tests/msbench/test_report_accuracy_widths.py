"""The report's accuracy interval widths: the seed-paired 95% half-width of each delta a claim reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import bd, record  # noqa: E402

from msbench.report.accuracy_widths import widths_table  # noqa: E402
from msbench.report.claims import CLAIMS  # noqa: E402
from msbench.report.load import RecordSet  # noqa: E402
from msbench.stats import mean_interval  # noqa: E402


def seeded(values: list[float], **knobs):
    rec = record(thr=1000, peak_gib=20, acc=sum(values) / len(values), breakdown=bd(0.025), **knobs)
    rec.metrics.extra["accuracy_run"] = {"values": values, "preset": "accuracy"}
    return rec


def test_half_width_is_the_paired_interval_of_the_claims_delta_listed_once_for_both_chips():
    base, o2 = [0.90, 0.92, 0.91, 0.93], [0.89, 0.92, 0.90, 0.91]
    records = [seeded(base, amp_level="O0", target=t) for t in ("model:ascend910a", "model:ascend910b")]
    records += [seeded(o2, amp_level="O2", target=t) for t in ("model:ascend910a", "model:ascend910b")]
    table = widths_table(RecordSet.of(records).frame, CLAIMS)
    assert len(table) == 1
    row = table.iloc[0]
    mean, half = mean_interval([(a - b) * 100 for a, b in zip(o2, base)])
    assert (row["claim"], row["delta"], row["accuracy_preset"], row["pairs"]) == ("amp", "amp_level=O2 vs amp_level=O0",
                                                                                  "accuracy", 4)
    assert row["delta_pp"] == pytest.approx(mean) and row["half_width_pp"] == pytest.approx(half)


def test_one_seed_has_no_width():
    records = [seeded([0.9], amp_level="O0"), seeded([0.8], amp_level="O3")]
    row = widths_table(RecordSet.of(records).frame, CLAIMS).iloc[0]
    assert row["half_width_pp"] is None and row["delta_pp"] == pytest.approx(-10.0)
