"""Predictions first, accuracy after: on a device-model target the predictions of a matrix take seconds
once its graphs exist, while its tiny-preset accuracy trainings take minutes. A run predicts and records
every cell first (each record marked `accuracy_run.pending`), prints the prediction table, and only then
trains: each record gains its accuracy and its seed-paired delta and is written again (a run file's
later record of a cell supersedes the earlier one, for the report and for `--resume`). An interrupted
run resumes with the trainings still pending. The trainings themselves are cached by numerics and seed
(hardware/mindspore/accuracy.py), so every cell that shares a baseline's numerics shares its runs.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterable, Mapping

from msbench.records import Record

PENDING = {"pending": "the accuracy trainings run after every prediction is recorded"}
LINE_EVERY_S = 30.0          # without a terminal: a progress line at most this often


def deferring(targets: Mapping[str, Any], options: Mapping[str, Any]) -> bool:
    """Whether this run predicts first: accuracy is asked for and every target can add it later."""
    return bool(options.get("accuracy")) and all(callable(getattr(t, "add_accuracy", None)) for t in targets.values())


def mark_pending(record: Record) -> None:
    if record.status in ("ok", "oom") and record.metrics.step_time_s is not None:
        record.metrics.extra["accuracy_run"] = dict(PENDING)


def is_pending(record: Record) -> bool:
    run = (record.metrics.extra or {}).get("accuracy_run")
    return isinstance(run, Mapping) and "pending" in run


class Lines:
    """Progress for a log, a pipe or cron: a line per phase and one every LINE_EVERY_S seconds."""

    def __init__(self, total: int, what: str) -> None:
        self.total, self.what, self.done, self.last = total, what, 0, time.monotonic()
        print(f"{what}: {total} cell(s) to train", file=sys.stderr, flush=True)

    def __call__(self, record: Record) -> None:
        self.done += 1
        now = time.monotonic()
        if self.done == self.total or now - self.last >= LINE_EVERY_S:
            self.last = now
            print(f"{self.what}: {self.done}/{self.total} ({record.cell.workload} {record.cell.label})",
                  file=sys.stderr, flush=True)


def add_accuracies(records: Iterable[Record], targets: Mapping[str, Any], is_baseline: Callable[[Record], bool],
                   finish: Callable[[Record], None], progress: Callable[[Record], None]) -> None:
    """Train every pending record's accuracy, baselines first (their accuracy anchors the deltas), and hand
    each completed record to `finish` (which computes the delta and writes it)."""
    for record in sorted(records, key=lambda r: not is_baseline(r)):
        record.metrics.extra.pop("accuracy_run", None)
        targets[record.cell.target].add_accuracy(record)
        finish(record)
        progress(record)
