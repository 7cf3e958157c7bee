"""Scripted targets for runner tests: each cell's `seed` picks what happens, so one matrix covers
success, crash, hang, exception, out-of-memory and an unsupported knob."""

from __future__ import annotations

import os
import threading
import time

from msbench.cell import Cell
from msbench.records import Metrics, Record

OK, CRASH, HANG, RAISE, OOM, REFUSED = 1, 2, 3, 4, 5, 6


class ScriptedTarget:
    """Isolated: runs in the worker process like a real MindSpore cell would."""

    isolate = True

    def __init__(self, delay: str = "0", accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        self.name = f"support_targets:{type(self).__name__}"
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


class SlowInlineTarget(InlineTarget):
    """Inline, 0.4 s a cell: slow enough to interrupt a run midway."""

    def __init__(self, accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        super().__init__("0.4", accuracy, accuracy_seeds)


class PythonBoundTarget(InlineTarget):
    """Inline and CPU-bound like the device model (`python_bound`): a local run forks for its cells. Each record
    says which process made it; seed 2 (CRASH) kills that process."""

    python_bound = True

    def run(self, cell: Cell) -> Record:
        record = super().run(cell)
        record.metrics.extra["pid"] = os.getpid()
        return record


class SlowScriptedTarget(ScriptedTarget):
    """Isolated, 5 s a cell: a worker is alive whenever the run is interrupted. (At 2 s a cell, under the CI
    suite's load, the first worker was seen late enough that a SIGINT reached a run that then ended 0.)"""

    def __init__(self, accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        super().__init__("5", accuracy, accuracy_seeds)


class EchoTarget:
    """Inline, always ok, whatever the knobs (fuzzed matrices run on it: no seed may crash the test process)."""

    isolate = False
    name = "support_targets:EchoTarget"

    def __init__(self, accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        self.accuracy = accuracy

    def supports(self, cell: Cell) -> str | None:
        return None

    def run(self, cell: Cell) -> Record:
        return Record(cell=cell, status="ok", metrics=Metrics(step_time_s=0.01, throughput=100.0))


class FingerprintedTarget(InlineTarget):
    """Inline, with a fingerprint read from $SUPPORT_FINGERPRINT: a test edits "the inputs" by changing it,
    and the step time follows it, so a re-run shows new numbers."""

    def fingerprint(self, cell: Cell) -> str:
        return os.environ.get("SUPPORT_FINGERPRINT", "v1")

    def run(self, cell: Cell) -> Record:
        record = super().run(cell)
        if record.metrics.step_time_s is not None:
            record.metrics.step_time_s *= float(os.environ.get("SUPPORT_SLOWDOWN", "1"))
        return record


class GatedTarget(InlineTarget):
    """For executor tests: marks where each cell runs (a file `<seed>.<cell id>.<node>` in $MSBENCH_TEST_MARKS),
    and holds cells with seed >= 20 until the file $MSBENCH_TEST_GATE exists, so a test can kill a node
    or the driver at a known point. Each cell takes 4 s, so a node can be killed while one runs."""

    def __init__(self, delay: str = "4.0", accuracy: bool = False, accuracy_seeds: int = 1) -> None:
        super().__init__(delay, accuracy, accuracy_seeds)

    def run(self, cell: Cell) -> Record:
        marks, gate = os.environ.get("MSBENCH_TEST_MARKS"), os.environ.get("MSBENCH_TEST_GATE")
        if marks:
            open(os.path.join(marks, f"{cell.settings.seed}.{cell.id}.{running_node()}"), "w").close()
        while gate and cell.settings.seed >= 20 and not os.path.exists(gate):
            time.sleep(0.2)
        return super().run(cell)


def running_node() -> str:
    """The Ray node id of this task, or `local` outside Ray."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
    except ImportError:
        return "local"


class DeferringTarget(InlineTarget):
    """Inline, like the device model: predicts each cell, and adds its accuracy later when the runner asks
    (`add_accuracy`); every call is logged in order, so a test can see predictions come first. The
    accuracy of seed 8 is interrupted once (a Ctrl-C during the trainings)."""

    log: list[tuple[str, int]] = []
    interrupt_seed: int | None = None

    def __init__(self, accuracy: bool = False, accuracy_seeds: int = 1, defer_accuracy: bool = False) -> None:
        super().__init__("0", accuracy, accuracy_seeds)
        self.defer_accuracy = defer_accuracy

    def run(self, cell: Cell) -> Record:
        DeferringTarget.log.append(("predict", cell.settings.seed))
        record = super().run(cell)
        record.metrics.accuracy = None
        if self.accuracy and not self.defer_accuracy:
            self.add_accuracy(record)
        return record

    def add_accuracy(self, record: Record) -> None:
        seed = record.cell.settings.seed
        if seed == DeferringTarget.interrupt_seed:
            DeferringTarget.interrupt_seed = None
            raise KeyboardInterrupt
        DeferringTarget.log.append(("train", seed))
        record.metrics.accuracy = 0.5 + seed / 1000


class LaneTarget(DeferringTarget):
    """A DeferringTarget whose accuracy phase runs two trainings at once (like the device model): seeds 7 and 9
    share their trainings (one group), and the first training of each group waits at a barrier until the other
    group's has started too, so a phase that trained one at a time would time out there. The baseline's
    training (seed 1) is the slower one, so the other group finishes first. `interrupt_seed` raises a
    KeyboardInterrupt in its lane, once."""

    accuracy_lanes = 2
    barrier: threading.Barrier | None = None
    trained: dict[str, float] = {}

    def accuracy_group(self, record: Record) -> str:
        return "base" if record.cell.settings.seed == 1 else "odd"

    def add_accuracy(self, record: Record, lanes: int = 1) -> None:
        seed, group = record.cell.settings.seed, self.accuracy_group(record)
        if seed == DeferringTarget.interrupt_seed:
            DeferringTarget.interrupt_seed = None
            raise KeyboardInterrupt
        if group not in LaneTarget.trained:
            if LaneTarget.barrier is not None:
                LaneTarget.barrier.wait()
            time.sleep(0.3 if seed == 1 else 0.0)
            LaneTarget.trained[group] = 0.5 + seed / 1000
            DeferringTarget.log.append(("train", seed, lanes))
        record.metrics.accuracy = LaneTarget.trained[group]


class NodeOnlyError(Exception):
    """Takes two arguments, so Ray cannot rebuild it on the driver (UnserializableException)."""

    def __init__(self, what: str, where: str) -> None:
        super().__init__(f"{what} on {where}")
        self.what, self.where = what, where


class RaisingOnNodeTarget(InlineTarget):
    """For executor tests: inside a Ray task, a cell of seed 7 raises outside the target's run (as a target that
    cannot be built on a node does); on the driver, and for other seeds, it is an InlineTarget."""

    def supports(self, cell: Cell) -> str | None:
        if cell.settings.seed == 7 and in_ray_task():
            raise NodeOnlyError("scripted failure outside run", running_node())
        return super().supports(cell)


def in_ray_task() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized() and ray.get_runtime_context().get_task_id() is not None
