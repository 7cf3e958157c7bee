"""The Profiler on real runs and the inference scenario, on the toy workload through the isolated child."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hardware.mindspore.profiling import op_summary
from msbench.runner import run_cell

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


def test_the_summary_parser_reads_the_cpu_files_per_step(tmp_path):
    frame = tmp_path / "FRAMEWORK"
    frame.mkdir()
    (frame / "cpu_op_type_info_0.csv").write_text(
        "op_type,type_occurrences,execution_frequency(per-step),total_compute_time,avg_time(ms),percent\n"
        "Conv2D,4,2,30.0,7.5,0.75\nReLU,4,2,10.0,2.5,0.25\n")
    (frame / "cpu_op_detail_info_0.csv").write_text(
        "op_side,op_type,op_name,full_op_name,op_occurrences,op_total_time(ms),op_avg_time(ms),total_proportion,subgraph,pid\n"
        "Host,ReLU,ReLU-op0,Default/ReLU-op0,2,10.0,5,0.25,Default,1\n"
        "Host,Conv2D,Conv2D-op0,Default/Conv2D-op0,2,30.0,15,0.75,Default,1\n")
    summary = op_summary(tmp_path, steps=2)
    assert summary["total_s"] == pytest.approx(0.020)
    assert summary["by_type"]["Conv2D"] == {"s": pytest.approx(0.015), "share": pytest.approx(0.75), "calls": 2.0}
    assert [k["type"] for k in summary["top_kernels"]] == ["Conv2D", "ReLU"]
    assert "reason" in op_summary(tmp_path / "missing", steps=2)
