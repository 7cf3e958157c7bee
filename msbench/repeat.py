"""Measured cells in several fresh processes, interleaved round by round.

A target that measures (it has `process_stop` and `combine_processes`, e.g. mindspore:<device>) gets
each cell run in one fresh child per process through the caller's `launch` (the runner's one child
transport), until the target's rule says enough; the cell's record combines them. Several cells given
together run interleaved: A, B, A, B ... (one process of each per round), so that a drift of the machine
(another job starting, thermal state) hits both sides of an A/B comparison alike instead of only the
second. Each process's machine conditions (msbench.conditions) are kept with it.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from msbench.cell import Cell
from msbench.conditions import ConditionsProbe, summarize, wait_quiet
from msbench.records import Record


@runtime_checkable
class MeasuresInProcesses(Protocol):
    def process_stop(self, records: Sequence[Record]) -> str | None:
        """Why no further process is needed for a cell that has these (ok) process records, or None."""

    def combine_processes(self, cell: Cell, records: Sequence[Record], reason: str) -> Record:
        """The cell's record from its processes' records."""


def run_in_processes(cells: Sequence[Cell], target: MeasuresInProcesses, launch: Callable[[Cell], Record],
                     wait_quiet_s: float = 0.0, say: Callable[[str], None] = print) -> list[Record]:
    """One record per cell (same order). A process that is not ok ends its cell with that record (the
    ok processes before it are noted in its extra); the other cells go on."""
    runs: list[list[Record]] = [[] for _ in cells]
    final: dict[int, Record] = {}
    while len(final) < len(cells):
        for i, cell in enumerate(cells):
            if i in final:
                continue
            waited = wait_quiet(wait_quiet_s, say=say) if wait_quiet_s > 0 else None
            with ConditionsProbe() as probe:
                record = launch(cell)
            conditions: dict[str, Any] = dict(probe.result)
            if waited is not None:
                conditions["wait_quiet"] = waited
            record.metrics.extra["conditions"] = conditions
            if record.status != "ok":
                record.metrics.extra["ok_processes_before"] = len(runs[i])
                final[i] = record
                continue
            runs[i].append(record)
            reason = target.process_stop(runs[i])
            if reason:
                combined = target.combine_processes(cell, runs[i], reason)
                combined.metrics.extra["conditions"] = summarize([r.metrics.extra["conditions"] for r in runs[i]])
                final[i] = combined
    return [final[i] for i in range(len(cells))]
