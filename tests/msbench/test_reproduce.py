"""The reproducibility check's arithmetic: cells paired by id, the larger relative gap per cell, and only
cells measured ok in both runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import record  # noqa: E402

from msbench.reproduce import differences, main, relative_difference  # noqa: E402


def test_relative_difference_is_symmetric_and_refuses_missing_values():
    assert relative_difference(100.0, 103.0) == pytest.approx(0.03)
    assert relative_difference(103.0, 100.0) == pytest.approx(0.03)
    assert relative_difference(None, 1.0) is None and relative_difference(0.0, 1.0) is None


def test_differences_pair_measured_cells_by_id():
    t = "mindspore:cpu"
    first = [record(target=t, thr=100.0), record(target=t, thr=200.0, amp_level="O2"),
             record(target=t, thr=50.0, mode="pynative"), record(thr=10.0)]
    second = [record(target=t, thr=200.0 * 1.10, amp_level="O2"), record(target=t, thr=101.0),
              record(target=t, status="failed", reason="x", mode="pynative"), record(thr=30.0)]
    table = differences(first, second)
    assert table["label"].tolist() == ["amp_level=O2", "base"]          # largest first; failed and model left out
    assert table["largest difference"].tolist() == pytest.approx([0.10, 0.01])
    assert table.loc[0, "throughput 1"] == 200.0 and table.loc[0, "throughput 2"] == pytest.approx(220.0)


def test_bad_goal_is_one_line(capsys):
    assert main(["matrices/nightly.toml", "--goal", "3"]) == 2
    assert "--goal=3.0 is not allowed" in capsys.readouterr().err
