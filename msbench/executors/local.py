"""`--executor local`: cells on this machine, `jobs` at a time (today's behaviour, the default)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Sequence

from msbench.child import kill_live_children
from msbench.executors.forked import CAN_FORK, run_forked
from msbench.executors.job import CellJob, Done
from msbench.matrix import Entry


class LocalExecutor:
    """Threads around the runner: an isolated cell's thread waits on its child process. Cells whose work is
    Python in this process (the device model's predictions) run in forked processes instead, where the
    platform can fork: threads would take turns on the interpreter lock."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs

    def prepare(self, entries: Sequence[Entry], job: CellJob, announce: Callable[[str], None]) -> None:
        try:
            job.prepare(entries, announce)
        except BaseException:
            kill_live_children()        # an interrupt: the compile children go with it
            raise

    def run(self, entries: Sequence[Entry], job: CellJob, done: Done) -> None:
        if self.jobs <= 1:
            for entry in entries:
                done(entry, job(entry))
            return
        if CAN_FORK and job.python_bound(entries):
            run_forked(entries, job, done, self.jobs)
            return
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            futures = {pool.submit(job, entry): entry for entry in entries}
            for future in as_completed(futures):     # recorded as each finishes, not in submission order
                done(futures[future], future.result())
        except BaseException:
            # An interrupt or a full disk: kill the children of the cells in progress, so their threads
            # return at once; `done` is never called again, so nothing more is recorded.
            kill_live_children()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        pass
