"""`distributed.combine`: one record from fake per-rank results (no msrun, no MindSpore)."""

from __future__ import annotations

import pytest

from hardware.mindspore.distributed import combine
from msbench.cell import Cell
from msbench.settings import make_settings

SINK = Cell(workload="resnet50", target="mindspore:ascend",
            settings=make_settings({"mode": "graph", "sink": True, "sink_size": 10, "devices": 2}))


def rank(i: int, call_median: float, *, steps_per_call: int = 10, memory: int = 1000, data_s: float = 0.05) -> dict:
    """One rank's rank<N>.json: its calls each ran `steps_per_call` optimizer steps (one sink round)."""
    samples = [call_median * f for f in (0.98, 1.0, 1.02)]
    return {"rank": i, "unsupported": None, "steps_per_call": steps_per_call,
            "stats": {"median": call_median, "iqr": 0.02 * call_median, "cv": 0.01, "ci95_rel": 0.01,
                      "samples": samples},
            "compile_s": 3.0, "data_s": data_s, "step_batch": 32, "global_samples": 64,
            "memory": {"headline_bytes": memory, "source": "device_max_allocated", "detail": {}}, "extra": {}}


def test_a_sink_round_is_sink_size_steps_not_one():
    record = combine(SINK, "ascend", [rank(0, 1.0), rank(1, 1.2, memory=2000)])
    m = record.metrics
    assert record.status == "ok"
    assert m.step_time_s == pytest.approx(0.12)              # the slowest rank's round / 10 steps
    assert m.throughput == pytest.approx(64 / 0.12)          # not 64 / 1.2: low by sink_size before the fix
    assert m.step_time_stats.samples == pytest.approx([0.1176, 0.12, 0.1224])
    assert m.breakdown["data_wait"] == pytest.approx(0.005)
    assert m.peak_memory_bytes == 2000 and m.extra["slowest_rank"] == 1 and m.extra["steps_per_call"] == 10
    assert m.extra["rank_medians"] == pytest.approx([0.1, 0.12])


def test_the_slowest_rank_is_judged_per_step_and_without_sink_a_call_is_a_step():
    mixed = combine(SINK, "ascend", [rank(0, 1.0, steps_per_call=5), rank(1, 1.5, steps_per_call=10)])
    assert mixed.metrics.extra["slowest_rank"] == 0 and mixed.metrics.step_time_s == pytest.approx(0.2)
    plain = combine(SINK, "ascend", [rank(0, 0.1, steps_per_call=1), rank(1, 0.11, steps_per_call=1)])
    assert plain.metrics.step_time_s == pytest.approx(0.11) and plain.metrics.throughput == pytest.approx(64 / 0.11)


def test_a_rank_that_refused_makes_the_cell_unsupported():
    refused = {"rank": 1, "unsupported": "recompute=full: marks no blocks"}
    record = combine(SINK, "ascend", [rank(0, 1.0), refused])
    assert (record.status, record.reason) == ("unsupported", "recompute=full: marks no blocks")
