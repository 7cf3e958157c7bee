"""Cells of a CPU-bound inline target (the device model) run in forked processes in a local run: each is
recorded once, the same as one at a time, and a process that dies costs only the cell it was running."""

import os

import pytest

from msbench.cell import Cell
from msbench.executors.forked import CAN_FORK, shares
from msbench.matrix import Entry
from msbench.runner import run_matrix
from msbench.settings import make_settings
from msbench.store import RunStore
from tests.msbench.test_runner import matrix, support_path  # noqa: F401 - the fixture

FORKING = "support_targets:PythonBoundTarget"
pytestmark = pytest.mark.skipif(not CAN_FORK, reason="this platform cannot fork")


def entry(target: str, workload: str, seed: int) -> Entry:
    return Entry(cell=Cell(workload=workload, settings=make_settings({"seed": seed}), target=target), status="ok")


def test_shares_split_the_entries_evenly_by_target_and_workload():
    entries = [entry(t, w, s) for t in ("model:ascend910a", "model:ascend910b") for w, n in (("resnet50", 5), ("bert-base", 3))
               for s in range(n)]
    split = shares(entries, 2)
    assert split == [list(range(8)), list(range(8, 16))]                # each chip's cells in one child
    mixed = [entries[i] for i in (0, 8, 1, 9, 5, 13)]                   # interleaved: grouped again
    assert shares(mixed, 2) == [[0, 2, 1], [3, 4, 5]]
    assert shares(entries, 3) == [list(range(5)), list(range(5, 10)), list(range(10, 16))]
    assert shares(entries[:1], 4) == [[0]] and shares(entries, 1) == [list(range(16))]


def pids_and_metrics(path):
    records = RunStore(path).load()
    return ({r.cell.settings.seed: r.metrics.extra.get("pid") for r in records},
            {r.cell_id: (r.status, r.metrics.step_time_s, r.metrics.throughput) for r in records})


def test_forked_cells_are_recorded_once_each_as_one_at_a_time_records_them(tmp_path, support_path):  # noqa: F811
    path = matrix(tmp_path, FORKING, [1, 4, 5, 6, 7, 8, 9])
    forked = run_matrix(path, plugins=(FORKING,), out=tmp_path / "forked", jobs=2, progress=False)
    serial = run_matrix(path, plugins=(FORKING,), out=tmp_path / "serial", jobs=1, progress=False)
    pids, forked_metrics = pids_and_metrics(forked.path)
    assert len(forked.records) == 7 and forked_metrics == pids_and_metrics(serial.path)[1]
    made = {pid for pid in pids.values() if pid is not None}
    assert os.getpid() not in made and len(made) == 2                  # two children made them, not this process
    assert forked_metrics[next(r.cell_id for r in forked.records if r.cell.settings.seed == 4)][0] == "failed"


def test_a_child_that_dies_costs_only_the_cell_it_was_running(tmp_path, support_path):  # noqa: F811
    path = matrix(tmp_path, FORKING, [2, 7, 8, 9, 10])
    result = run_matrix(path, plugins=(FORKING,), out=tmp_path / "runs", jobs=2, progress=False)
    records = {r.cell.settings.seed: r for r in RunStore(result.path).load()}
    assert len(records) == 6                                            # the five and the baseline, each once
    assert records[2].status == "failed" and "exited with code 3 while running this cell" in records[2].reason
    assert all(r.status == "ok" for seed, r in records.items() if seed != 2)
