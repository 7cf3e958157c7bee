"""Progress of a run's phases, on a terminal and off it. On a terminal: a rich bar with its ETA. In a log, a
pipe or cron, where a bar prints nothing until it ends: a line when the phase starts, when a cell finishes at
least LINE_EVERY_S after the last line, at the end, and a heartbeat line when LINE_EVERY_S pass with none (a
cold phase can spend minutes compiling or training before its first cell finishes), so a log never falls
silent for longer than that.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

from msbench.records import Record

LINE_EVERY_S = 30.0          # off a terminal: a progress line at least this often, and no more often per cell


class Lines:
    """Progress as lines on `stream`: `with Lines(total, what) as advance:` then `advance(record)` per cell."""

    def __init__(self, total: int, what: str, completed: int = 0, stream: TextIO | None = None,
                 every_s: float = LINE_EVERY_S) -> None:
        self.total, self.what, self.done, self.every_s = total, what, completed, every_s
        self.stream = stream or sys.stderr
        self.started = self.last = time.monotonic()
        self.latest = ""
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.beat = threading.Thread(target=self._heartbeat, name=f"progress-{what}", daemon=True)

    def __enter__(self) -> Callable[[Record], None]:
        self._line(f"{self.total - self.done} cell(s) to go")
        self.beat.start()
        return self.advance

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.beat.join()

    def advance(self, record: Record) -> None:
        with self.lock:
            self.done += 1
            self.latest = f"{record.cell.workload} {record.cell.label} -> {record.status}"
            if self.done == self.total or time.monotonic() - self.last >= self.every_s:
                self._line(f"{self.done}/{self.total} ({self.latest})")

    def _heartbeat(self) -> None:
        while not self.stop.wait(self.every_s / 4):
            with self.lock:
                if time.monotonic() - self.last >= self.every_s:
                    self._line(f"{self.done}/{self.total}, still working")

    def _line(self, text: str) -> None:
        self.last = time.monotonic()
        elapsed = int(self.last - self.started)
        print(f"{self.what}: {text} [{elapsed // 60}:{elapsed % 60:02d}]", file=self.stream, flush=True)


class Bar:
    """A rich progress bar with ETA; `with Bar(total, completed, title) as advance:`."""

    def __init__(self, total: int, completed: int, title: str) -> None:
        self.total, self.completed, self.title = total, completed, title

    def __enter__(self) -> Callable[[Record], None]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), transient=False)
        self.bar.start()
        task = self.bar.add_task(self.title, total=self.total, completed=self.completed)

        def advance(record: Record) -> None:
            self.bar.update(task, advance=1, description=f"{record.cell.workload} {record.cell.label} "
                                                         f"-> {record.status}")
        return advance

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


class Silent:
    """No progress (`--quiet`)."""

    def __enter__(self) -> Callable[[Record], None]:
        return lambda record: None

    def __exit__(self, *exc: object) -> None:
        return None


def progress(total: int, completed: int, what: str, enabled: bool, tty: bool | None = None) -> Bar | Lines | Silent:
    """The one progress display of a phase: a bar on a terminal, lines elsewhere, nothing when disabled."""
    if not enabled:
        return Silent()
    if sys.stdout.isatty() if tty is None else tty:
        return Bar(total, completed, what)
    return Lines(total, what, completed)
