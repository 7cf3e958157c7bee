"""Scripted targets for runner tests: each cell's `seed` picks what happens, so one matrix covers
success, crash, hang, exception, out-of-memory and an unsupported knob."""

from __future__ import annotations

import os
import time

from msbench.cell import Cell
from msbench.records import Metrics, Record

OK, CRASH, HANG, RAISE, OOM, REFUSED = 1, 2, 3, 4, 5, 6


class ScriptedTarget:
    """Isolated: runs in the worker process like a real MindSpore cell would."""

    isolate = True

    def __init__(self, delay: str = "0", accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        self.name = "support_targets:ScriptedTarget"
        self.delay = float(delay)
        self.accuracy = accuracy

    def supports(self, cell: Cell) -> str | None:
        return "seed 6 asks for a knob this target cannot honour" if cell.settings.seed == REFUSED else None

    def run(self, cell: Cell) -> Record:
        seed = cell.settings.seed
        if seed == CRASH:
            os._exit(3)
        if seed == HANG:
            time.sleep(3600)
        if seed == RAISE:
            raise RuntimeError("scripted failure")
        if seed == OOM:
            raise MemoryError
        time.sleep(self.delay)
        metrics = Metrics(step_time_s=0.01 * seed, throughput=100.0 / seed, peak_memory_bytes=1000 * seed,
                          accuracy=(0.5 + seed / 1000) if self.accuracy else None, accuracy_metric="top1")
        return Record(cell=cell, status="ok", metrics=metrics)


class InlineTarget(ScriptedTarget):
    """The same, in the runner's own process (like the device model)."""

    isolate = False
