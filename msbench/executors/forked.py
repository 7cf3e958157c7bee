"""Inline cells whose work is Python on this machine's CPU (the device model's predictions) in forked
processes, `jobs` at a time, for the local executor.

Threads share one interpreter lock, so two prediction threads took as long as one: the nightly's 108
predictions were about 45 s either way on two cores. Forked children each take a share of the entries,
ordered by target and workload (the cells that share graphs and costed kernels stay together), and send
each finished record back as it is made, so the driver records it and moves its progress bar as before.
A child that dies (a signal, an interpreter crash) costs the record of the cell it was running, which
becomes a `failed` record saying so; the driver runs the rest of its share itself.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.connection import Connection, wait
from typing import Callable, Sequence

from msbench.cell_run import failure_record
from msbench.executors.job import Done
from msbench.matrix import Entry
from msbench.records import Record

CAN_FORK = "fork" in multiprocessing.get_all_start_methods()


def shares(entries: Sequence[Entry], jobs: int) -> list[list[int]]:
    """Entry indices in at most `jobs` contiguous shares of equal size (within one), taken from the entries
    ordered by (target, workload) group, so that at most `jobs` - 1 groups are split between two children.
    The split depends on the entries alone, so a run is the same whatever machine makes it."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, entry in enumerate(entries):
        groups.setdefault((entry.cell.target, entry.cell.workload), []).append(i)
    order = [i for members in groups.values() for i in members]
    count = max(1, min(jobs, len(order)))
    bounds = [len(order) * k // count for k in range(count + 1)]
    return [order[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def serve(job: Callable[[Entry], Record], entries: Sequence[Entry], share: list[int], conn: Connection) -> None:
    """The child: each entry of its share, its record sent as soon as it is made; None when all are sent. It
    ends with os._exit: the standard streams' buffers it inherited are the driver's to write, and a lock a
    driver thread held at the fork would never be released here."""
    for i in share:
        conn.send((i, job(entries[i]).to_dict()))
    conn.send(None)
    conn.close()
    os._exit(0)


def run_forked(entries: Sequence[Entry], job: Callable[[Entry], Record], done: Done, jobs: int) -> None:
    """Every entry run by `job` in forked children, `done(entry, record)` called here as each arrives."""
    context = multiprocessing.get_context("fork")
    children: dict[Connection, tuple[multiprocessing.process.BaseProcess, list[int]]] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for share in shares(entries, jobs):
            ours, theirs = context.Pipe(duplex=False)
            child = context.Process(target=serve, args=(job, entries, share, theirs))
            child.start()
            theirs.close()
            children[ours] = (child, list(share))
        while children:
            for conn in wait(list(children)):
                child, left = children[conn]          # type: ignore[index]
                try:
                    message = conn.recv()             # type: ignore[union-attr]
                except EOFError:
                    message = None
                    child.join()
                    if left:                           # it died mid-share: the cell in hand is lost, not the rest
                        lost = entries[left.pop(0)]
                        done(lost, failure_record(lost.cell, "failed", f"the prediction process (pid {child.pid}) "
                                                  f"exited with code {child.exitcode} while running this cell"))
                        for i in left:
                            done(entries[i], job(entries[i]))
                        left.clear()
                if message is None:
                    del children[conn]                # type: ignore[arg-type]
                    conn.close()                      # type: ignore[union-attr]
                    child.join()
                    continue
                i, data = message
                left.remove(i)
                done(entries[i], Record.from_dict(data))
    finally:
        for child, _ in children.values():            # an interrupt, or `done` failed (a full disk)
            if child.is_alive():
                child.kill()
            child.join()

