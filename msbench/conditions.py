"""What the machine was doing while a cell was measured, and when two measurements are comparable.

Real CPU runs here differ about 2x between a loaded and a quiet machine, so a measured record keeps
the load average before and after each measured process and the CPU time spent by everything on the
machine during it (from /proc/stat: busy and steal), split into this run's own (this process and its
measured children, getrusage, and every descendant seen alive during the cell: `DescendantCpu`) and the
others'. The others' share is what decides: the load average is
kept for reading, never for the rule, because it is a one-minute decayed average that still holds the
previous cell's own threads (1.6-3.7 on 2 cores between the cells of a quiet back-to-back run).
Readers (`compare`, `report`, the cpu-profile fitter) ask `mismatch()` before they put two
measurements side by side, and the fitter asks `not_quiet()` of every cell; `msbench run --wait-quiet`
waits on `busy_fraction()`.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

# The comparability rule: flag two measurements when one ran on an overloaded machine (others kept more
# than OVERLOAD_SHARE of all cores busy during it, or more than STEAL_LIMIT of the CPU was stolen by
# the hypervisor; for old records without the others' share, a load average above the core count)
# and the other did not, or when their others' load differs by more than LOAD_RATIO (loads below
# LOAD_FLOOR cores count as LOAD_FLOOR, so 0.1 vs 0.3 on an idle machine is no difference).
LOAD_RATIO = 2.0
LOAD_FLOOR = 0.5
OVERLOAD_SHARE = 0.5
STEAL_LIMIT = 0.10
# Quiet (`--wait-quiet`, and every cell a fit reads): the others keep less than this fraction of all
# cores busy (over a sample before a cell; over the cell itself in its record).
QUIET_BUSY = 0.25
QUIET_SAMPLE_S = 2.0
# How often the probe lists this process's descendants (a scan of /proc: about a millisecond here).
DESCENDANT_SAMPLE_S = 0.2


@dataclass(frozen=True)
class CpuTimes:
    """Jiffies of all CPUs since boot (first line of /proc/stat)."""

    busy: int
    steal: int
    total: int


def read_cpu_times(path: Path = Path("/proc/stat")) -> CpuTimes | None:
    """None where /proc/stat is missing (not Linux)."""
    try:
        first = path.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user/nice]
    values = [int(v) for v in first[1:9]] + [0] * (8 - len(first[1:9]))
    total = sum(values)
    idle = values[3] + values[4]
    return CpuTimes(busy=total - idle - values[7], steal=values[7], total=total)


def cores() -> int:
    return os.cpu_count() or 1


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def rusage_cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class DescendantCpu:
    """CPU seconds spent during the block by this process's descendants, from samples of each one while
    it is alive (a zombie still reports its times). getrusage counts a child only once it is waited for,
    and a grandchild only if its own parent waited for it: MindSpore's graph-kernel compile workers are
    not, so a graph_kernel cell's own compile CPU showed up as the others' (25-38% of the cores)."""

    def __init__(self, every_s: float = DESCENDANT_SAMPLE_S) -> None:
        self.every_s = every_s
        self.first: dict[tuple[int, float], float] = {}     # at first sight (work done before the block)
        self.last: dict[tuple[int, float], float] = {}
        self.stop = threading.Event()
        self.me = psutil.Process()
        self.sample(initial=True)
        self.thread = threading.Thread(target=self.run, name="msbench-descendant-cpu", daemon=True)
        self.thread.start()

    def sample(self, initial: bool = False) -> None:
        try:
            procs = self.me.children(recursive=True)
        except psutil.Error:
            return
        for proc in procs:
            try:
                key = (proc.pid, proc.create_time())
                times = proc.cpu_times()
            except psutil.Error:                             # it ended between the listing and the read
                continue
            spent = times.user + times.system
            self.first.setdefault(key, spent if initial else 0.0)
            self.last[key] = spent

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()

    def finish(self) -> float:
        self.stop.set()
        self.thread.join()
        self.sample()
        return sum(max(0.0, spent - self.first[key]) for key, spent in self.last.items())


class ConditionsProbe:
    """`with ConditionsProbe() as probe: ...` then `probe.result`: the machine's state around the block.
    The run's own CPU is this process's, plus the larger of its waited-for children's (getrusage: a child
    that ended between samples still counts) and its descendants' as sampled alive (a worker nobody waits
    for still counts); either alone is a lower bound of the same quantity, so their maximum never counts
    a process twice."""

    def __enter__(self) -> "ConditionsProbe":
        self.load_before = loadavg()
        self.cpu_before = read_cpu_times()
        self.self_before = rusage_cpu_s(resource.RUSAGE_SELF)
        self.children_before = rusage_cpu_s(resource.RUSAGE_CHILDREN)
        self.descendants = DescendantCpu()
        self.own_s: float | None = None
        self.t0 = time.monotonic()
        self.result: dict[str, Any] = {}
        return self

    def own_cpu_s(self) -> float:
        """The run's own CPU seconds over the block, fixed when the block ends."""
        if self.own_s is None:
            waited = rusage_cpu_s(resource.RUSAGE_CHILDREN) - self.children_before
            self.own_s = (rusage_cpu_s(resource.RUSAGE_SELF) - self.self_before) + max(waited, self.descendants.finish())
        return self.own_s

    def __exit__(self, *exc: object) -> None:
        elapsed = time.monotonic() - self.t0
        own_s = self.own_cpu_s()
        cpu_after = read_cpu_times()
        result: dict[str, Any] = {"cores": cores(), "load_before": self.load_before, "load_after": loadavg(),
                                  "seconds": round(elapsed, 3)}
        if self.cpu_before and cpu_after and cpu_after.total > self.cpu_before.total:
            ticks = cpu_after.total - self.cpu_before.total
            busy = (cpu_after.busy - self.cpu_before.busy) / ticks
            own = own_s / (elapsed * cores()) if elapsed > 0 else 0.0
            result.update(busy_during=round(busy, 4), steal_during=round((cpu_after.steal - self.cpu_before.steal)
                                                                         / ticks, 4),
                          own_during=round(min(own, busy), 4), others_during=round(max(0.0, busy - own), 4))
        self.result = result


def measured_others(cond: Mapping[str, Any]) -> bool:
    """Whether the record measured the others' CPU share during the cell (not only load averages)."""
    return cond.get("others_during") is not None


def others_load(cond: Mapping[str, Any]) -> float | None:
    """Cores kept busy by other processes during the cell: the others' CPU share × cores where the
    record measured it; the load average before the cell only for records without it."""
    n = int(cond.get("cores") or cores())
    if measured_others(cond):
        return float(cond["others_during"]) * n
    if cond.get("load_before"):
        return float(cond["load_before"][0])
    return None


def overloaded(cond: Mapping[str, Any]) -> str | None:
    """Why a measurement ran on an overloaded machine, or None."""
    load, n = others_load(cond), int(cond.get("cores") or cores())
    if load is not None and measured_others(cond) and load > OVERLOAD_SHARE * n:
        return f"others kept {load:.2f} of {n} cores busy (> {OVERLOAD_SHARE:.0%})"
    if load is not None and not measured_others(cond) and load > n:
        return f"load {load:.2f} > {n} cores"
    steal = cond.get("steal_during")
    if steal is not None and steal > STEAL_LIMIT:
        return f"CPU steal {steal:.0%} > {STEAL_LIMIT:.0%}"
    return None


def not_quiet(cond: Mapping[str, Any] | None) -> str | None:
    """Why a measurement was not taken on a quiet machine (what a fit requires of every cell), or None."""
    if not cond or not measured_others(cond):
        return "the others' CPU share during it was not measured"
    n = int(cond.get("cores") or cores())
    load = others_load(cond)
    if load is not None and load >= QUIET_BUSY * n:
        return f"others kept {load:.2f} of {n} cores busy (quiet below {QUIET_BUSY * n:.2f})"
    return overloaded(cond)


def mismatch(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> str | None:
    """Why two measurements' conditions are too different to compare (None: comparable or unknown)."""
    if not a or not b:
        return None
    over_a, over_b = overloaded(a), overloaded(b)
    if bool(over_a) != bool(over_b):
        return f"one ran overloaded ({over_a or over_b}), the other not"
    la, lb = others_load(a), others_load(b)
    if la is None or lb is None:
        return None
    hi, lo = max(la, lb, LOAD_FLOOR), max(min(la, lb), LOAD_FLOOR)
    if hi / lo > LOAD_RATIO:
        return f"others' load {la:.2f} vs {lb:.2f} cores (ratio {hi / lo:.1f} > {LOAD_RATIO:g})"
    return None


def summarize(per_process: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell's conditions from its processes': the worst of each (what could have slowed it most)."""
    per_process = [c for c in per_process if c]
    if not per_process:
        return {}
    out: dict[str, Any] = {"cores": per_process[0].get("cores"), "processes": len(per_process)}
    firsts = [c["load_before"] for c in per_process if c.get("load_before")]
    if firsts:
        out["load_before"] = max(firsts, key=lambda v: v[0])
    afters = [c["load_after"] for c in per_process if c.get("load_after")]
    if afters:
        out["load_after"] = max(afters, key=lambda v: v[0])
    for key in ("busy_during", "steal_during", "own_during", "others_during"):
        values = [c[key] for c in per_process if c.get(key) is not None]
        if values:
            out[key] = max(values)
    return out


def busy_fraction(sample_s: float = QUIET_SAMPLE_S, sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Fraction of all cores busy over the next `sample_s` seconds (None without /proc/stat)."""
    before = read_cpu_times()
    sleep(sample_s)
    after = read_cpu_times()
    if not before or not after or after.total <= before.total:
        return None
    return (after.busy - before.busy) / (after.total - before.total)


def wait_quiet(timeout_s: float, say: Callable[[str], None] = print,
               sample: Callable[[], float | None] = busy_fraction,
               clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Wait up to `timeout_s` for the machine to be quiet (others' CPU use < QUIET_BUSY of all cores),
    saying what it waits for; returns what happened (recorded with the cell), never raises on a busy host."""
    start = clock()
    busy = sample()
    if busy is None:
        return {"quiet": None, "waited_s": 0.0, "reason": "no /proc/stat: cannot tell"}
    announced = False
    while busy >= QUIET_BUSY and clock() - start < timeout_s:
        if not announced:
            say(f"waiting up to {timeout_s:g} s for a quiet machine: CPU {busy:.0%} busy of {cores()} cores "
                f"(quiet below {QUIET_BUSY:.0%}), load {loadavg()}")
            announced = True
        busy = sample()
        if busy is None:
            break
    waited = round(clock() - start, 1)
    quiet = busy is not None and busy < QUIET_BUSY
    if announced:
        say(f"{'quiet' if quiet else 'still busy'} after {waited:g} s (CPU {busy:.0%} busy); measuring")
    return {"quiet": quiet, "waited_s": waited, "busy": round(busy, 4) if busy is not None else None}


def of_record(record: Any) -> dict[str, Any] | None:
    """A record's measured conditions (None for the device model and for records made before they were kept)."""
    return record.metrics.extra.get("conditions") or None


def mixed(labelled: list[tuple[str, Mapping[str, Any] | None]]) -> str | None:
    """Why a set of measurements is too mixed to be read together (a fit, a report section): the first
    that differs from the quietest of them, by `mismatch`; None when all are comparable or unknown."""
    known = [(label, c) for label, c in labelled if c and others_load(c) is not None]
    if len(known) < 2:
        return None
    quiet_label, quiet = min(known, key=lambda lc: others_load(lc[1]))  # type: ignore[arg-type,return-value]
    for label, cond in known:
        why = mismatch(quiet, cond)
        if why:
            return f"{label} against {quiet_label}: {why}"
    return None
