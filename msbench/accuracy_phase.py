"""Predictions first, accuracy after: on a device-model target the predictions of a matrix take seconds
once its graphs exist, while its tiny-preset accuracy trainings take minutes. A run predicts and records
every cell first (each record marked `accuracy_run.pending`), prints the prediction table, and only then
trains: each record gains its accuracy and its seed-paired delta and is written again (a run file's
later record of a cell supersedes the earlier one, for the report and for `--resume`). An interrupted
run resumes with the trainings still pending. The trainings themselves are cached by numerics and seed
(hardware/mindspore/accuracy.py), so every cell that shares a baseline's numerics shares its runs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from msbench.child import kill_live_children
from msbench.records import Record

PENDING = {"pending": "the accuracy trainings run after every prediction is recorded"}


def deferring(targets: Mapping[str, Any], options: Mapping[str, Any]) -> bool:
    """Whether this run predicts first: accuracy is asked for and every target can add it later."""
    return bool(options.get("accuracy")) and all(callable(getattr(t, "add_accuracy", None)) for t in targets.values())


def mark_pending(record: Record) -> None:
    if record.status in ("ok", "oom") and record.metrics.step_time_s is not None:
        record.metrics.extra["accuracy_run"] = dict(PENDING)


def is_pending(record: Record) -> bool:
    run = (record.metrics.extra or {}).get("accuracy_run")
    return isinstance(run, Mapping) and "pending" in run


def lanes_of(targets: Mapping[str, Any]) -> int:
    """Trainings at once: what every target allows (`accuracy_lanes`; 1 when a target does not say)."""
    return min((getattr(t, "accuracy_lanes", 1) for t in targets.values()), default=1)


@dataclass
class Trainings:
    """The phase's plan: records grouped by the trainings they read (`accuracy_group`: cells whose numerics
    are equal share one group), each group's first record trained and the others read its cached runs
    after; the dearest groups first (`accuracy_cost`, an estimate), anchors (records without a pending
    baseline) first among equals and within each group."""
    groups: list[list[Record]]

    @classmethod
    def of(cls, records: Iterable[Record], targets: Mapping[str, Any],
           baseline_of: Callable[[Record], str | None]) -> "Trainings":
        records = list(records)
        ids = {r.cell_id for r in records}
        groups: dict[Any, list[Record]] = {}
        for record in sorted(records, key=lambda r: baseline_of(r) in ids):
            group = getattr(targets[record.cell.target], "accuracy_group", lambda r: None)(record)
            groups.setdefault(record.cell_id if group is None else group, []).append(record)
        cost = {id(g): getattr(targets[g[0].cell.target], "accuracy_cost", lambda r: 0.0)(g[0]) for g in groups.values()}
        return cls(sorted(groups.values(), key=lambda g: -cost[id(g)]))       # dearest first: the lanes end together


def add_accuracies(records: Iterable[Record], targets: Mapping[str, Any], baseline_of: Callable[[Record], str | None],
                   finish: Callable[[Record], None], progress: Callable[[Record], None]) -> None:
    """Train every pending record's accuracy and hand each completed record to `finish` (which computes
    the delta against its baseline and writes it): a record whose baseline (`baseline_of`: its cell id, None
    for a baseline) is still pending waits for it, since the baseline's accuracy anchors the delta. Groups
    of records that share trainings run `lanes_of(targets)` at a time, each child told the lanes so it takes
    its share of the host's CPUs; an interrupt kills the children in progress and records nothing more."""
    plan = Trainings.of(records, targets, baseline_of)
    lanes = lanes_of(targets)
    pending = {r.cell_id for group in plan.groups for r in group}
    held: list[Record] = []

    def ready(record: Record) -> None:
        held.append(record)
        while True:
            free = [r for r in held if baseline_of(r) not in pending]
            if not free:
                return
            for r in free:
                held.remove(r)
                pending.discard(r.cell_id)
                finish(r)
                progress(r)

    stop = threading.Event()                   # set on an interrupt: no lane starts another training

    def train(group: list[Record]) -> list[Record]:
        for record in group:                   # the first trains; the others read its cached runs
            if stop.is_set():
                break
            record.metrics.extra.pop("accuracy_run", None)
            if lanes > 1:
                targets[record.cell.target].add_accuracy(record, lanes=lanes)
            else:
                targets[record.cell.target].add_accuracy(record)
        return group

    if lanes <= 1:
        for group in plan.groups:
            for record in train(group):
                ready(record)
        return
    pool = ThreadPoolExecutor(max_workers=lanes)
    futures: list[Future[list[Record]]] = []
    try:
        futures = [pool.submit(train, group) for group in plan.groups]
        for future in as_completed(futures):
            for record in future.result():
                ready(record)
    except BaseException:
        stop.set()
        while not all(f.done() or f.cancel() for f in futures):
            kill_live_children()               # an interrupt: the trainings in progress go with it, and a
            time.sleep(0.1)                    # child a lane started as it came is killed on the next turn
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
