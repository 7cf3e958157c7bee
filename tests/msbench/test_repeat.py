"""Measured cells in fresh processes: the round-robin order, the stopping hook and failures."""

from __future__ import annotations

from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.repeat import run_in_processes
from msbench.settings import make_settings


def cell(seed: int) -> Cell:
    return Cell(workload="resnet50", preset="tiny", settings=make_settings({"seed": seed}), target="fake")


class ThreeEach:
    """Stops a cell after three ok processes; combines by averaging step times."""

    def process_stop(self, records):
        return "three" if len(records) == 3 else None

    def combine_processes(self, c, records, reason):
        mean = sum(r.metrics.step_time_s for r in records) / len(records)
        return Record(cell=c, status="ok", metrics=Metrics(step_time_s=mean, extra={"reason": reason}))


def test_pairs_run_interleaved_and_combine():
    order: list[int] = []

    def launch(c):
        order.append(c.settings.seed)
        return Record(cell=c, status="ok", metrics=Metrics(step_time_s=float(len(order))))

    a, b = run_in_processes([cell(1), cell(2)], ThreeEach(), launch)
    assert order == [1, 2, 1, 2, 1, 2]                                  # A, B, A, B, A, B
    assert a.metrics.step_time_s == 3.0 and b.metrics.step_time_s == 4.0
    assert a.metrics.extra["reason"] == "three" and a.metrics.extra["conditions"]["processes"] == 3


def test_a_failed_process_ends_only_its_cell():
    calls = {1: 0, 2: 0}

    def launch(c):
        calls[c.settings.seed] += 1
        if c.settings.seed == 2 and calls[2] == 2:
            return Record(cell=c, status="timeout", reason="no result after 1 s")
        return Record(cell=c, status="ok", metrics=Metrics(step_time_s=1.0))

    a, b = run_in_processes([cell(1), cell(2)], ThreeEach(), launch)
    assert a.status == "ok" and calls[1] == 3
    assert b.status == "timeout" and b.metrics.extra["ok_processes_before"] == 1 and calls[2] == 2
    assert "load_before" in b.metrics.extra["conditions"]
