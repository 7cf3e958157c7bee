"""What an executor runs and returns: the job that runs one matrix entry (plain data, shippable to another
process or node), the callback a finished record goes to, and the executor's protocol. Apart from
`msbench.executors` so the executors themselves import it without importing the package that picks them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from msbench.cell import Cell
from msbench.cell_run import failure_record, run_cell
from msbench.matrix import Entry
from msbench.records import Record
from msbench.targets import resolve_target

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

    def python_bound(self, entries: Sequence[Entry]) -> bool:
        """Whether every target of the entries runs its cells as Python in this process that keeps a core busy
        (the optional `Target.python_bound`): threads would not run two such cells at once."""
        names = {entry.cell.target for entry in entries if entry.status != "invalid"}
        return bool(names) and all(getattr(resolve_target(name, self.plugins, **self.options), "python_bound", False)
                                   for name in names)

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

    def python_bound(self, entries: Sequence[Entry]) -> bool:
        """Whether every target of the entries runs its cells as Python in this process that keeps a core busy
        (the optional `Target.python_bound`): threads would not run two such cells at once."""
        names = {entry.cell.target for entry in entries if entry.status != "invalid"}
        return bool(names) and all(getattr(resolve_target(name, self.plugins, **self.options), "python_bound", False)
                                   for name in names)

    def prepare(self, entries: Sequence[Entry], job: CellJob, announce: Callable[[str], None]) -> None:
        """Before `run`: `job.prepare` where the cells will run, or nothing where that is not here."""

    def run(self, entries: Sequence[Entry], job: CellJob, done: Done) -> None:
        """Run every entry with `job` and call `done(entry, record)` in this thread as each finishes.
        `record.provenance` may hold where the cell ran (the runner adds the rest)."""

    def close(self) -> None:
        """Release what the executor started (threads, a local Ray instance)."""
