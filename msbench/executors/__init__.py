"""Executors: how a matrix's cells are scheduled. `local` runs them on this machine (threads around
the runner's child processes); `ray` submits each as a task to a Ray cluster. Either way the runner
(the driver) is the only writer of the store: an executor hands each finished record to `done`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from msbench.errors import UserError
from msbench.executors.job import CellJob, Done, Executor
from msbench.executors.ray_cluster import check_reachable
from msbench.plugins import import_object

__all__ = ["CellJob", "Done", "Executor", "check_executor", "executor_env", "executor_name", "open_executor"]

EXECUTOR_ENV = "MSBENCH_EXECUTOR"          # the default of --executor (how asv's setup_cache gets it)
EXECUTORS: dict[str, str] = {
    "local": "msbench.executors.local:LocalExecutor",
    "ray": "msbench.executors.ray_cluster:RayExecutor",
}


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
