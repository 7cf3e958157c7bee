"""The child process of `msbench calibrate host` (`python -m hardware.calibration.host_probe`, started by
hardware/calibration/host_cost.py through msbench.child_io): iterate one workload's real pipeline and time
each of its threads, its Python callables, the consumer and the GIL-held share, as that module's docstring
describes. pipeline_modes.py's child reuses its clock and segment timer.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from msbench.child_io import serve
from msbench.settings import make_settings
from workloads.registry import get_workload

REPEATS = 5                 # timed segments per worker count; the median is reported
MIN_SAMPLES = 64            # samples per timed segment (whole batches: one ResNet-50 batch of 256)
REPLAY_CALLS = 16          # recorded calls per Python callable replayed by the GIL probe
# Each callable is replayed on its own (`gil_shares`), five times for at least 0.5 s: a policy that draws its ops
# at random (RandAugment) runs other work in each pass, and three replays of 0.1 s of all callables together put
# one pipeline's GIL share anywhere from 0.29 to 1.00 (December 2026).
REPLAY_REPEATS = 5
REPLAY_MIN_S = 0.5         # each replay repeats the recorded calls for at least this long in one thread
MINOR_STAGE = 0.01         # threads under this share of the pipeline's CPU are summed into one stage

@dataclass(frozen=True)
class ProbePlan:
    """How the probe reads a split: one untimed epoch, then `repeats` segments of `per_segment` batches."""

    batch: int
    per_segment: int
    repeats: int
    train_samples: int          # the split, cut to the timed samples

    @classmethod
    def for_split(cls, train_samples: int, batch: int) -> "ProbePlan":
        per_segment = max(1, -(-MIN_SAMPLES // batch))
        return cls(batch, per_segment, REPEATS, min(train_samples, REPEATS * per_segment * batch))

    @property
    def epoch_batches(self) -> int:
        return max(1, self.train_samples // self.batch)

    @property
    def epochs(self) -> int:
        """The untimed first epoch plus enough epochs for the timed batches."""
        return 1 + -(-self.repeats * self.per_segment // self.epoch_batches)


class PythonClock:
    """CPU seconds inside the Python callables the pipeline hands to MindSpore, per callable (a tag)
    and per thread, plus a few recorded calls for the GIL replay. Thread CPU time, not wall time: a
    callable waiting for the GIL held by another pipeline thread would otherwise be counted twice."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.thread_tag: dict[int, str] = {}
        self.recorded: dict[str, list[tuple[Callable[..., Any], tuple[Any, ...]]]] = {}   # by tag
        self.recording = True
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def timed(self, fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if self.recording and self._counts.get(tag, 0) < REPLAY_CALLS:
                with self._lock:
                    self._counts[tag] = self._counts.get(tag, 0) + 1
                    self.recorded.setdefault(tag, []).append((fn, copy.deepcopy(args)))
            start = time.thread_time()
            try:
                return fn(*args)
            finally:
                spent = time.thread_time() - start
                with self._lock:
                    self.seconds[tag] = self.seconds.get(tag, 0.0) + spent
                    self.thread_tag.setdefault(threading.get_native_id(), tag)
        return call


class TimedSource:
    """A random-access source whose `__getitem__` is timed (GeneratorDataset calls it in Python)."""

    def __init__(self, source: Any, clock: PythonClock) -> None:
        self._source, self._getitem = source, clock.timed(source.__getitem__, "source")

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> Any:
        return self._getitem(index)


def instrument_python_stages(clock: PythonClock) -> None:
    """Wrap every Python callable given to GeneratorDataset, `map` and `batch(per_batch_map=)` (child only)."""
    import mindspore.dataset as ds
    from mindspore.dataset.transforms.transforms import TensorOperation

    generator, map_, batch = ds.GeneratorDataset, ds.Dataset.map, ds.Dataset.batch
    maps = {"count": 0}

    class TimedGeneratorDataset(generator):  # type: ignore[misc, valid-type]
        def __init__(self, source: Any, *args: Any, **kwargs: Any) -> None:
            maps["count"] = 0                                    # a new pipeline numbers its maps from 0
            super().__init__(TimedSource(source, clock), *args, **kwargs)

    def timed_map(self: Any, operations: Any = None, *args: Any, **kwargs: Any) -> Any:
        tag = f"map[{maps['count']}]"
        maps["count"] += 1
        ops = operations if isinstance(operations, list) else [operations]
        wrapped = [op if isinstance(op, TensorOperation) or not callable(op) else clock.timed(op, tag) for op in ops]
        return map_(self, wrapped, *args, **kwargs)

    def timed_batch(self: Any, *args: Any, per_batch_map: Any = None, **kwargs: Any) -> Any:
        if per_batch_map is not None:
            kwargs["per_batch_map"] = clock.timed(per_batch_map, "per_batch")
        return batch(self, *args, **kwargs)

    ds.GeneratorDataset = TimedGeneratorDataset
    ds.Dataset.map, ds.Dataset.batch = timed_map, timed_batch


def schedstat(tid: int | str) -> tuple[int, int]:
    """A thread's nanoseconds on a CPU and waiting on a run queue for one (/proc/.../schedstat)."""
    on_cpu, waiting = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[:2]
    return int(on_cpu), int(waiting)


def thread_schedstats() -> dict[int, tuple[int, int]]:
    """`schedstat` of every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = schedstat(tid)
        except (OSError, ValueError):                             # the thread ended meanwhile
            pass
    return out


def pin_threads(cpus: set[int]) -> None:
    """Pin every thread of this process (MindSpore starts its pipeline threads lazily: call it again)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def timed_segments(iterator: Iterator[Any], plan: ProbePlan, clock: PythonClock,
                   cpus: set[int]) -> dict[str, Any]:
    """Per timed segment, per sample: wall seconds, each thread's CPU, the Python callables' CPU by tag."""
    for _ in range(plan.epoch_batches - 1):                     # the rest of the untimed first epoch
        next(iterator)
    clock.recording = False
    pin_threads(cpus)
    main_tid = threading.main_thread().native_id
    samples = plan.per_segment * plan.batch
    walls, threads, waits, pythons = [], [], [], []
    for _ in range(plan.repeats):
        before, python_before, start = thread_schedstats(), dict(clock.seconds), time.perf_counter()
        for _ in range(plan.per_segment):
            next(iterator)
        walls.append((time.perf_counter() - start) / samples)
        after = thread_schedstats()
        threads.append({tid: (cpu - before.get(tid, (0, 0))[0]) * 1e-9 / samples for tid, (cpu, _) in after.items()})
        waits.append(sum(wait - before.get(tid, (0, 0))[1] for tid, (_, wait) in after.items()) * 1e-9 / samples)
        pythons.append({tag: (sec - python_before.get(tag, 0.0)) / samples for tag, sec in clock.seconds.items()})
    return {"walls": walls, "threads": threads, "runqueue_waits": waits, "pythons": pythons, "main": main_tid}


def stage_table(timed: Mapping[str, Any], thread_tag: Mapping[int, str]) -> tuple[list[dict[str, Any]], list[float]]:
    """The pipeline's threads as named stages (median CPU per sample over the segments), and the
    consumer's CPU per segment. A thread that ran a Python callable carries its tag and that tag's
    Python time; threads under `MINOR_STAGE` of the total are summed into one."""
    segments = timed["threads"]
    tids = sorted({tid for seg in segments for tid in seg if tid != timed["main"]})
    cpu = {tid: statistics.median(seg.get(tid, 0.0) for seg in segments) for tid in tids}
    spread = {tid: [min(seg.get(tid, 0.0) for seg in segments), max(seg.get(tid, 0.0) for seg in segments)]
              for tid in tids}
    python = {tag: statistics.median(seg.get(tag, 0.0) for seg in timed["pythons"])
              for tag in {t for seg in timed["pythons"] for t in seg}}
    total = sum(cpu.values()) or 1.0
    stages, minor, minor_tids = [], 0.0, 0
    ranked = sorted(tids, key=lambda t: (thread_tag.get(t) is None, -cpu[t]))
    for rank, tid in enumerate(ranked):
        tag = thread_tag.get(tid)
        if tag is None and cpu[tid] < MINOR_STAGE * total:
            minor, minor_tids = minor + cpu[tid], minor_tids + 1
            continue
        py = min(python.pop(tag, 0.0), cpu[tid]) if tag else 0.0
        stages.append({"name": tag or f"thread {rank}", "cpu_seconds_per_sample": cpu[tid],
                       "python_seconds_per_sample": py, "spread": spread[tid]})
    if minor > 0:
        stages.append({"name": f"{minor_tids} minor threads", "cpu_seconds_per_sample": minor,
                       "python_seconds_per_sample": 0.0, "spread": [minor, minor]})
    consumer = [seg.get(timed["main"], 0.0) for seg in segments]
    return stages, consumer


def gil_replay(calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]) -> dict[str, Any]:
    """The GIL-held share of the recorded Python calls: run them in one thread, then in two at once
    (each the whole list); with a share g held, each of two threads takes (1 + g) times as long.
    A thread's time excludes its waits on a run queue, so other processes on the host do not count
    as GIL contention."""
    if not calls:
        return {"calls": 0, "one_thread_s": [], "two_threads_s": [], "gil_fraction": 0.0}

    def run(out: list[float], passes: int = 1) -> None:
        tid, start = threading.get_native_id(), time.perf_counter()
        _, wait_before = schedstat(tid)
        for _ in range(passes):
            for fn, args in calls:
                fn(*copy.deepcopy(args))
        out.append(time.perf_counter() - start - (schedstat(tid)[1] - wait_before) * 1e-9)

    first: list[float] = []
    run(first)
    passes = max(1, math.ceil(REPLAY_MIN_S / max(first[0], 1e-9)))
    ones: list[float] = []
    twos: list[float] = []
    for _ in range(REPLAY_REPEATS):
        run(ones, passes)
        pair_times: list[float] = []
        pair = [threading.Thread(target=run, args=(pair_times, passes)) for _ in range(2)]
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        twos.append(max(pair_times))
    share = statistics.median(two / one - 1.0 for one, two in zip(ones, twos))
    return {"calls": len(calls), "passes": passes, "one_thread_s": ones, "two_threads_s": twos,
            "gil_fraction": min(1.0, max(0.0, share))}


def gil_shares(stages: Sequence[Mapping[str, Any]],
               recorded: Mapping[str, Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]]) -> dict[str, Any]:
    """The GIL replay of each Python callable on its own, and the pipeline's share as their Python-time-weighted
    mean (so g x the stages' Python time is the sum of each callable's GIL-held time). Replaying callables
    together let the dearest one's share stand for all: mindcv's Mixup copies whole batches (numpy, GIL
    released) while its RandAugment holds the GIL (600 calls on one image in two threads took 1.9-2.0x one
    thread's time), and one mixed replay put that pipeline anywhere from 0.09 to 1.00."""
    by_callable = {tag: gil_replay(calls) for tag, calls in sorted(recorded.items())}
    python = {s["name"]: s["python_seconds_per_sample"] for s in stages}
    weights = {tag: python.get(tag, 0.0) for tag in by_callable}
    total = sum(weights.values())
    share = (sum(by_callable[t]["gil_fraction"] * w for t, w in weights.items()) / total if total > 0 else
             max((r["gil_fraction"] for r in by_callable.values()), default=0.0))
    return {"calls": sum(r["calls"] for r in by_callable.values()), "gil_fraction": share,
            "by_callable": by_callable}


def run_pipeline(wl: Any, preset: Any, request: Mapping[str, Any], workers: int, plan: ProbePlan,
                 clock: PythonClock, cpus: set[int]) -> tuple[dict[str, Any], int]:
    settings = make_settings({"data_format": request["data_format"], "workers": workers, "prefetch": 1, "seed": 1})
    pin_threads(cpus)
    dataset = wl.make_dataset(preset, "train", settings, plan.batch, workdir=Path(request["dump_dir"]))
    iterator = dataset.repeat(plan.epochs).create_tuple_iterator(output_numpy=True, num_epochs=1)
    first = next(iterator)
    size = int(sum(column.nbytes for column in first) // plan.batch)
    timed = timed_segments(iterator, plan, clock, cpus)
    del iterator, dataset
    return timed, size


def measure(request: Mapping[str, Any]) -> dict[str, Any]:
    """The stage profile at 1 worker on 1 core, the GIL replay, the held-out point at 2 workers (child side)."""
    clock = PythonClock()
    instrument_python_stages(clock)
    wl = get_workload(request["workload"])
    preset = wl.preset(request["preset"], request["overrides"])
    batch = preset.batch_size
    plan = ProbePlan.for_split(preset.train_samples, batch)
    if plan.train_samples < preset.train_samples:
        preset = wl.preset(request["preset"], {**request["overrides"], "train_samples": plan.train_samples})
    cpus = sorted(os.sched_getaffinity(0))
    one, two = set(cpus[:1]), set(cpus[:2])
    timed, size = run_pipeline(wl, preset, request, 1, plan, clock, one)
    stages, consumer = stage_table(timed, clock.thread_tag)
    pin_threads(two)
    replay = gil_shares(stages, clock.recorded)
    held_two, _ = run_pipeline(wl, preset, request, 2, plan, clock, two)
    return {"stages": stages, "consumer_segments": consumer, "gil": replay, "bytes_per_sample": size,
            "batch_size": batch, "samples_timed_per_worker_count": plan.repeats * plan.per_segment * batch,
            "held_out": {"1": {"workers": 1, "cores": len(one), "segments": timed["walls"],
                               "runqueue_wait_segments": timed["runqueue_waits"]},
                         "2": {"workers": 2, "cores": len(two), "segments": held_two["walls"],
                               "runqueue_wait_segments": held_two["runqueue_waits"]}}}


if __name__ == "__main__":
    sys.exit(serve(measure))
