"""Executors: how a matrix's cells are scheduled. `local` runs them on this machine (threads around
the runner's child processes); `ray` submits each as a task to a Ray cluster. Either way the runner
(the driver) is the only writer of the store: an executor hands each finished record to `done`.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from msbench.cell import Cell
from msbench.cell_run import failure_record, run_cell
from msbench.errors import UserError
from msbench.matrix import Entry
from msbench.records import Record
from msbench.plugins import import_object
from msbench.targets import resolve_target

EXECUTOR_ENV = "MSBENCH_EXECUTOR"          # the default of --executor (how asv's setup_cache gets it)
EXECUTORS: dict[str, str] = {
    "local": "msbench.executors.local:LocalExecutor",
    "ray": "msbench.executors.ray_cluster:RayExecutor",
}
Done = Callable[[Entry, Record], None]


@dataclass(frozen=True)
class CellJob:
    """What running one entry needs, and nothing of the driver's state: plain data, so an executor
    can ship it to another process or node."""

    options: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 1800.0
    plugins: tuple[str, ...] = ()          # the command line's --allow-plugin specs (never the matrix file's)
    wait_quiet_s: float = 0.0              # --wait-quiet: before each measured process (msbench.repeat)

    def __call__(self, entry: Entry) -> Record:
        if entry.status == "invalid":
            return failure_record(entry.cell, "invalid", entry.reason)
        return run_cell(entry.cell, options=self.options, timeout=self.timeout, plugins=self.plugins,
                        wait_quiet_s=self.wait_quiet_s)

    def prepare(self, entries: Sequence[Entry], announce: Callable[[str], None]) -> None:
        """Each target's work that its cells share, done once before any runs (the optional
        `Target.prepare`: the device model compiles a matrix's LLM parts)."""
        cells: dict[str, list[Cell]] = {}
        for entry in entries:
            if entry.status != "invalid":
                cells.setdefault(entry.cell.target, []).append(entry.cell)
        for name, chosen in cells.items():
            prepare = getattr(resolve_target(name, self.plugins, **self.options), "prepare", None)
            if prepare is not None:
                prepare(chosen, announce)


class Executor(Protocol):
    name: str

    def prepare(self, entries: Sequence[Entry], job: CellJob, announce: Callable[[str], None]) -> None:
        """Before `run`: `job.prepare` where the cells will run, or nothing where that is not here."""

    def run(self, entries: Sequence[Entry], job: CellJob, done: Done) -> None:
        """Run every entry with `job` and call `done(entry, record)` in this thread as each finishes.
        `record.provenance` may hold where the cell ran (the runner adds the rest)."""

    def close(self) -> None:
        """Release what the executor started (threads, a local Ray instance)."""


def executor_name(name: str | None) -> str:
    """`--executor`, else `$MSBENCH_EXECUTOR`, else `local`; refused with the allowed names otherwise."""
    chosen = name or os.environ.get(EXECUTOR_ENV) or "local"
    if chosen not in EXECUTORS:
        where = "--executor" if name else EXECUTOR_ENV
        raise UserError(f"{where}={chosen!r} is not allowed; allowed: {', '.join(EXECUTORS)}")
    return chosen


def executor_env(name: str | None, address: str | None) -> dict[str, str]:
    """The variables that make `run_matrix` in another process (asv's setup_cache) use this executor:
    `$MSBENCH_EXECUTOR`, and Ray's own `$RAY_ADDRESS` for the cluster."""
    chosen = executor_name(name)
    check_address(chosen, address)
    return {EXECUTOR_ENV: chosen, **({"RAY_ADDRESS": address} if address else {})}


def check_address(executor: str, address: str | None) -> None:
    if address and executor != "ray":
        raise UserError(f"--address={address!r} is not allowed with --executor {executor}; allowed: with --executor ray")


def check_executor(name: str | None, address: str | None) -> None:
    """Refuse, before a run writes anything, an executor it cannot use: an unknown name, an address of no
    form Ray takes ($RAY_ADDRESS too) or one where no cluster answers (a one-line error within seconds)."""
    chosen = executor_name(name)
    check_address(chosen, address)
    cluster = address or os.environ.get("RAY_ADDRESS")
    if chosen == "ray" and cluster:
        # cycle: msbench.executors.ray_cluster imports CellJob and Done from here
        from msbench.executors.ray_cluster import check_reachable

        check_reachable(cluster, "--address" if address else "RAY_ADDRESS")


@contextlib.contextmanager
def open_executor(name: str | None, *, jobs: int, address: str | None = None) -> Iterator[Executor]:
    """The named executor for the block, closed after it (also on an interrupt)."""
    chosen = executor_name(name)
    check_address(chosen, address)
    cls = import_object(EXECUTORS[chosen])
    executor: Executor = cls(address=address) if chosen == "ray" else cls(jobs=jobs)  # type: ignore[operator]
    try:
        yield executor
    finally:
        executor.close()
