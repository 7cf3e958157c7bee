"""The accuracy budget summary: each training counted once (cells share runs by key), CPU of trained runs only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import record  # noqa: E402

from msbench.accuracy_budget import summarize  # noqa: E402


def with_runs(values, keys, cpu, **knobs):
    rec = record(**knobs)
    rec.metrics.extra["accuracy_run"] = {"values": values, "keys": keys, "cpu_s": cpu, "wall_s": [c * 2 for c in cpu],
                                         "preset": "accuracy"}
    return rec


def test_shared_runs_count_once_and_cached_ones_cost_nothing():
    records = [with_runs([0.90, 0.92], ["a", "b"], [10.0, 12.0], amp_level="O0"),
               with_runs([0.90, 0.92], ["a", "b"], [0.0, 0.0], amp_level="O0", workers=1),   # shares the O0 runs
               with_runs([0.89, 0.92], ["c", "d"], [11.0, 14.0], amp_level="O2")]
    summary = summarize(records, wall_s=60.0, seeds=2, cpu_s=55.0)
    mine = summary["workloads"]["resnet50"]
    assert (summary["trainings"], summary["training_cpu_s"], summary["phase_cpu_s"]) == (4, 47.0, 55.0)
    assert (mine["trainings"], mine["cpu_s_median"], mine["cpu_s_max"]) == (4, 11.5, 14.0)
    [delta] = mine["deltas"]
    assert delta["delta"] == "amp_level=O2 vs amp_level=O0" and delta["pairs"] == 2
    assert delta["delta_pp"] == pytest.approx(-0.5)
    assert list(delta["half_width_by_seeds"]) == ["2"] and delta["half_width_by_seeds"]["2"] == delta["half_width_pp"]
