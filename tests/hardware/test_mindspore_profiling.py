"""The Profiler on real runs and the inference scenario, on the toy workload through the isolated child."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from msbench.cell_run import run_cell

pytestmark = pytest.mark.slow


@pytest.fixture
def one_process(toy_env, monkeypatch):
    """One measuring process a cell: what is checked here is in each process's record."""
    for name in ("PROCESSES", "MAX_PROCESSES"):
        monkeypatch.setenv(f"MSBENCH_MEASURE_{name}", "1")
    return toy_env


def test_a_profiled_cell_keeps_the_profiler_output_and_a_per_op_summary(one_process, toy_cell, tmp_path):
    cell = toy_cell(mode="graph")
    root = tmp_path / "profiles"
    record = run_cell(cell, options={"profile_dir": str(root)}, timeout=240.0)
    assert record.status == "ok", record.reason
    m = record.metrics
    summary = m.op_profile
    assert Path(summary["dir"]).is_dir() and Path(summary["dir"]).parent == root / cell.id
    assert summary["steps"] == 3 and summary["total_s"] > 0
    assert {"MatMul", "ApplyMomentum"} <= set(summary["by_type"])          # forward and optimizer kernels
    assert sum(e["share"] for e in summary["by_type"].values()) == pytest.approx(1.0)
    assert summary["by_type"]["ApplyMomentum"]["calls"] > 0
    times = [k["s"] for k in summary["top_kernels"]]
    assert times and times == sorted(times, reverse=True)
    # the profiled steps come after the measured ones: the timed metrics are the usual ones
    assert m.step_time_s == m.step_time_stats.median and m.peak_memory_source == "pool+params"


def test_an_inference_cell_times_the_exported_forward_network(one_process, toy_cell):
    cell = replace(toy_cell(mode="graph", batch_size=4), scenario="inference")
    record = run_cell(cell, timeout=240.0)
    assert record.status == "ok", record.reason
    m = record.metrics
    lat = m.latency_s
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= max(m.step_time_stats.samples)
    assert m.throughput == pytest.approx(4 / m.step_time_s)
    assert m.extra["batch_size"] == 4 and m.extra["mindir_bytes"] > 0 and m.extra["runtime"].startswith("mindspore.load")
    assert "mindspore_lite" in m.extra
    assert m.peak_memory_detail["params"] > 0 and m.op_profile == {}      # not profiled: no summary


def test_training_knobs_make_an_inference_cell_unsupported(one_process, toy_cell):
    cell = replace(toy_cell(mode="graph", optimizer="adam"), scenario="inference")
    record = run_cell(cell, timeout=240.0)
    assert record.status == "unsupported" and "optimizer='adam'" in record.reason

