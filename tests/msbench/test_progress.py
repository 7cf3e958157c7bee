"""Progress off a terminal: lines at the start, per finished cell at most every `every_s`, at the end, and a
heartbeat when nothing finishes for `every_s` (a cold compile or training phase), so a log never goes silent."""

from __future__ import annotations

import io
import time

from msbench.cell import Cell
from msbench.progress import Bar, Lines, Silent, progress
from msbench.records import Record


def record(label: str) -> Record:
    return Record(cell=Cell(workload="resnet50", label=label), status="ok")


def test_a_phase_with_no_finished_cell_still_prints_a_heartbeat_line():
    out = io.StringIO()
    with Lines(2, "accuracy", stream=out, every_s=0.2) as advance:
        time.sleep(0.7)                                 # nothing finishes: the heartbeat speaks
        advance(record("a"))
        advance(record("b"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("accuracy: 2 cell(s) to go [0:00]")
    assert any(line.startswith("accuracy: 0/2, still working [") for line in lines[1:-1])
    assert lines[-1].startswith("accuracy: 2/2 (resnet50 b -> ok) [")


def test_cells_that_finish_close_together_share_a_line():
    out = io.StringIO()
    with Lines(50, "predictions", stream=out, every_s=60.0) as advance:
        for i in range(50):
            advance(record(str(i)))
    assert out.getvalue().splitlines()[1:] == ["predictions: 50/50 (resnet50 49 -> ok) [0:00]"]


def test_a_terminal_gets_a_bar_a_log_gets_lines_and_quiet_gets_nothing():
    assert isinstance(progress(3, 0, "x", enabled=True, tty=True), Bar)
    assert isinstance(progress(3, 0, "x", enabled=True, tty=False), Lines)
    assert isinstance(progress(3, 0, "x", enabled=False), Silent)
