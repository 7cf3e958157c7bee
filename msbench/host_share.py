"""Sharing this host between msbench's child processes: a timing measurement runs alone.

Compile and training children (graph extraction, accuracy runs) may overlap one another, as their
results do not depend on time; a timing probe (the device model's host-cost measurement) must not
share the CPUs with them, or it measures the contention: ResNet-50's JPEG pipeline took 1.4 ms a
sample alone and 1.7-2.3 ms beside a compile. A readers-writer lock on files in the msbench cache
root, held across threads and processes, with a turnstile so that a waiting measurement is not
starved by children that keep overlapping. `flock` is released when its holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
from typing import Iterator

from msbench.cache import cache_root, file_lock


@contextlib.contextmanager
def _host(mode: int) -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        with file_lock(root / ".host.turnstile"):      # a waiting measurement holds this: no new sharers pass
            held.enter_context(file_lock(root / ".host.lock", mode))
        yield


def shared_host() -> contextlib.AbstractContextManager[None]:
    """For work whose result does not depend on time: runs beside other such work."""
    return _host(fcntl.LOCK_SH)


def exclusive_host() -> contextlib.AbstractContextManager[None]:
    """For a timing measurement: waits for running children to finish and keeps new ones out."""
    return _host(fcntl.LOCK_EX)
