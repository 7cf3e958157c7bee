"""mindspore:cpu end to end: real toy cells through the runner's isolated child process."""

from __future__ import annotations

import os
import sys

import pytest

from hardware.mindspore.accuracy import accuracy_in_subprocess
from hardware.mindspore.backend import host_has_avx512
from hardware.mindspore.target import MindSporeTarget
from msbench.cell_run import run_cell

pytestmark = pytest.mark.slow


def run(cell, timeout=180.0, **options):
    return run_cell(cell, options=options, timeout=timeout)


@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_tiny_cell_end_to_end(toy_env, toy_cell, mode):
    record = run(toy_cell(mode=mode))
    assert record.status == "ok", record.reason
    m = record.metrics
    stats = m.step_time_stats
    assert m.step_time_s == stats.median > 0 and len(stats.samples) >= 2 * 4     # two processes (toy_env)
    assert len(stats.process_medians) == 2 and len(m.extra["processes"]) == 2
    assert m.step_time_s == pytest.approx(sum(stats.process_medians) / 2)
    assert {"load_before", "others_during"} <= set(m.extra["conditions"])
    assert 0 <= stats.ci95_rel and stats.iqr >= 0 and stats.cv >= 0
    assert m.throughput == pytest.approx(16 / stats.median)        # tiny preset: batch 16, one device
    assert m.compile_time_s >= 0 and all(p["first_step_s"] > p["median_s"] for p in m.extra["processes"])
    assert m.peak_memory_source == "pool+params"
    assert m.peak_memory_bytes == m.peak_memory_detail["pool_peak"] + m.peak_memory_detail["params"]
    assert m.peak_memory_detail["rss_peak"] > m.peak_memory_detail["rss_baseline"] > 0
    assert all(p["loss_last"] < p["loss_first"] for p in m.extra["processes"])
    assert m.extra["op_threads"] == len(os.sched_getaffinity(0)) and m.extra["cpu_affinity"]
    if host_has_avx512():
        assert m.extra["onednn_max_cpu_isa"] == "AVX2"
    assert m.accuracy is None                                        # not asked for


def test_amp_o2_dynamic_loss_scale_with_accuracy(toy_env, toy_cell):
    record = run(toy_cell(mode="graph", amp_level="O2", loss_scale="dynamic"), accuracy=True)
    assert record.status == "ok", record.reason
    m = record.metrics
    assert m.extra["amp_effective"] == "fp16, norms fp32"
    assert m.accuracy_metric == "top1" and m.accuracy > 0.25 + 0.3          # chance is 1/4
    run_info = m.extra["accuracy_run"]
    assert run_info["epochs"] == 3 and run_info["samples_seen"] == 3 * 256
    assert run_info["seeds"] == [1, 2, 3] and len(set(run_info["keys"])) == 3          # 3 seeds by default
    assert m.accuracy == pytest.approx(sum(run_info["values"]) / 3)
    again = accuracy_in_subprocess(toy_cell(mode="pynative", amp_level="O2", loss_scale="dynamic"))
    assert again.key == run_info["keys"][0], "parent and child must agree on the key"
    assert again.cached is True and again.value == run_info["values"][0]          # mode is not a numerics knob


def test_recompute_lowers_the_pool_peak(toy_env, toy_cell):
    peaks = {}
    for rc in ("none", "full"):
        record = run(toy_cell(preset="deep", mode="graph", recompute=rc, batch_size=512))
        assert record.status == "ok", record.reason
        assert record.metrics.extra["recomputed_blocks"] == (8 if rc == "full" else 0)
        peaks[rc] = record.metrics.peak_memory_detail["pool_peak"]
    assert peaks["full"] < 0.8 * peaks["none"]


def test_two_devices_through_msrun(toy_env, toy_cell):
    record = run(toy_cell(mode="graph", devices=2), timeout=240)
    assert record.status == "ok", record.reason
    m = record.metrics
    assert m.extra["ranks"] == 2 and m.extra["global_samples_per_step"] == 32
    assert m.throughput == pytest.approx(32 / m.step_time_s)
    processes = m.extra["processes"]
    assert len(processes) == 2 and m.step_time_stats.process_medians == [p["median_s"] for p in processes]
    for process in processes:       # each msrun launch: the slowest rank's median
        assert len(process["rank_medians"]) == 2 and process["median_s"] == max(process["rank_medians"])
    assert m.step_time_s == pytest.approx(sum(m.step_time_stats.process_medians) / 2)
    assert m.extra["op_threads"] == max(1, len(os.sched_getaffinity(0)) // 2)


def test_dataset_cache_server_cell(toy_env, toy_cell):
    record = run(toy_cell(mode="graph", data_format="mindrecord", cache=True))
    assert record.status == "ok", record.reason
    assert all(p["loss_last"] < p["loss_first"] for p in record.metrics.extra["processes"])


def test_memory_exhaustion_is_an_oom_record(toy_env, toy_cell, tmp_path, monkeypatch):
    """A 100k x 100k hidden layer (40 GB of fp32 weights) under an 8 GB address-space limit."""
    limited = tmp_path / "python-limited"
    limited.write_text(f'#!/bin/sh\nulimit -v 8000000\nexec "{sys.executable}" "$@"\n')
    limited.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(limited))
    record = run(toy_cell(preset="wide", overrides={"hidden": 100_000}, mode="graph"))
    assert record.status == "oom", record.reason
    assert "MemoryError" in record.reason


def test_crash_is_a_failed_record_with_the_traceback(toy_env, toy_cell):
    record = run(toy_cell(overrides={"hidden": 0}))
    assert record.status == "failed"
    assert "Traceback" in record.reason and "exit code" in record.reason


def test_unsupported_is_reported_without_running(toy_env, toy_cell):
    record = run(toy_cell(mode="graph", sink=True))
    assert record.status == "unsupported" and "Ascend/GPU only" in record.reason
    direct = MindSporeTarget("cpu").run(toy_cell(optimizer="lamb"))
    assert direct.status == "unsupported" and "Lamb" in direct.reason


def test_an_ab_pair_is_measured_interleaved(toy_env, toy_cell):
    from msbench.commands.measure import ratio_line
    from msbench.cell_run import run_cells

    a, b = run_cells([toy_cell(mode="graph"), toy_cell(mode="graph", batch_size=32)], timeout=180.0)
    assert a.status == b.status == "ok", (a.reason, b.reason)
    for record in (a, b):
        assert len(record.metrics.step_time_stats.process_medians) == 2
    assert "B/A step time:" in ratio_line(a, b)


def test_seeds_trained_in_one_child_match_seeds_trained_apart(toy_env, toy_cell, monkeypatch, tmp_path):
    """One child trains a setting's seeds one after another on one compiled step, reseeded per seed
    (workloads.reseed): the numbers must be those of a fresh process per seed (a shared compile cache
    changed them once)."""
    from hardware.mindspore.accuracy import accuracies_in_subprocess, seed_cells

    cells = seed_cells(toy_cell(amp_level="O2", loss_scale="dynamic"), 2)
    together = accuracies_in_subprocess(cells)
    assert [r.cached for r in together] == [False, False] and all(r.train_s > 0 for r in together)
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path / "apart"))
    apart = [accuracy_in_subprocess(c) for c in reversed(cells)]          # seed 2 first, in its own process
    assert [r.value for r in reversed(apart)] == [r.value for r in together]
    assert [r.losses for r in reversed(apart)] == [r.losses for r in together]
