"""`msbench calibrate host [WORKLOAD...] | --all`: measure the data pipelines on this host and rewrite
`hardware/calibration/host_cost.json`, the file the device model reads (hardware/model/host_cost.py).

This is the only place that times the host. Each entry (workload x preset x overrides x data format)
is measured in a child process, alone on the host (msbench.host_share), by iterating the workload's
real `make_dataset(...)`. What the pipelined law (hardware/model/host_time.py) needs is measured at
ONE worker, as CPU time, which does not depend on how many cores compete for the host:

- each pipeline thread's CPU seconds per sample (/proc/self/task/*/schedstat, nanoseconds): the
  reader, every map, the batch op; a thread is named by the Python callable it ran (the generator
  source, `map[i]`, `per_batch`), else `thread k` by rank of its CPU time;
- of it, the time inside Python callables (a thread-CPU clock around each callable the pipeline
  hands to MindSpore), and the consumer: the main thread's CPU while it iterates;
- the GIL-held share of the Python callables: some of their calls, recorded, are replayed in one
  thread and in two (g = t2 / t1 - 1), as numpy/PIL release the GIL for most of their time.

The wall-clock seconds per sample at 1 worker on 1 core and at 2 workers on 2 cores (every thread
pinned with sched_setaffinity, prefetch 1) are kept as a held-out check of the law on this host:
`msbench calibrate host --check` prints the law's error on them.

The workloads' sources render and encode each sample once, then serve the stored bytes (as a
reader of files would), so the first epoch is excluded; each figure is the median over a few
timed segments of whole batches of later epochs, each at least `MIN_SAMPLES` samples.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import os
import platform
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from hardware.model.graph import check_preset
from hardware.model.host_cost import CALIBRATION_FILE, SCHEMA, entry_key, host_cost, read_calibration
from hardware.model.host_time import per_sample_seconds
from msbench.child_io import ChildError, run_child, serve
from msbench.errors import ConfigError, UserError
from msbench.host_share import exclusive_host, shared_host

REPEATS = 5                 # timed segments per worker count; the median is reported
MIN_SAMPLES = 64            # samples per timed segment (whole batches: one ResNet-50 batch of 256)
TIMEOUT_S = 900.0
DATA_FORMATS = ("generator", "mindrecord")
DEFAULT_PRESETS = ("tiny", "full")
REPLAY_CALLS = 16          # recorded calls per Python callable replayed by the GIL probe
REPLAY_REPEATS = 3
REPLAY_MIN_S = 0.1         # each replay repeats the recorded calls for at least this long in one thread
MINOR_STAGE = 0.01         # threads under this share of the pipeline's CPU are summed into one stage
NOTE = ("Measured on the reference machine kind by `msbench calibrate host --all`. Schema 2, per entry: the "
        "CPU seconds per sample of each pipeline thread at 1 worker (`stages`, median over timed segments, "
        "with the Python-callable part), the consumer's, the GIL-held share of the Python callables "
        "(`gil_fraction`, from a replay in 1 and 2 threads), the held-out wall seconds per sample at 1 worker "
        "on 1 core and 2 workers on 2 cores (`held_out`), bytes per sample, the host and its load average "
        "around the measurement, and the command.")


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


@dataclass(frozen=True)
class EntrySpec:
    """What one calibration entry measures."""

    workload: str
    preset: str
    overrides: tuple[tuple[str, Any], ...]
    data_format: str

    @classmethod
    def read_by(cls, workload: str, preset: str, overrides: Mapping[str, Any], data_format: str) -> "EntrySpec":
        """The entry the model reads for this cell's pipeline (a workload feeding another's pipeline reads
        that one's), so naming yolov8s measures the one YOLO pipeline's entry."""
        from workloads.registry import calibration_entry

        source, source_preset, source_overrides = calibration_entry(workload, preset, overrides)
        return cls(source, source_preset, tuple(sorted(source_overrides.items())), data_format)

    @property
    def key(self) -> str:
        return entry_key(self.workload, self.preset, dict(self.overrides), self.data_format)

    def command(self) -> str:
        flags = "".join(f" --override {k}={json.dumps(v)}" for k, v in self.overrides)
        return (f"msbench calibrate host {self.workload} --preset {self.preset} "
                f"--data-format {self.data_format}{flags}")


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo, else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --- child side ------------------------------------------------------------------------------------

class PythonClock:
    """CPU seconds inside the Python callables the pipeline hands to MindSpore, per callable (a tag)
    and per thread, plus a few recorded calls for the GIL replay. Thread CPU time, not wall time: a
    callable waiting for the GIL held by another pipeline thread would otherwise be counted twice."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.thread_tag: dict[int, str] = {}
        self.recorded: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.recording = True
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def timed(self, fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if self.recording and self._counts.get(tag, 0) < REPLAY_CALLS:
                with self._lock:
                    self._counts[tag] = self._counts.get(tag, 0) + 1
                    self.recorded.append((fn, copy.deepcopy(args)))
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


def run_pipeline(wl: Any, preset: Any, request: Mapping[str, Any], workers: int, plan: ProbePlan,
                 clock: PythonClock, cpus: set[int]) -> tuple[dict[str, Any], int]:
    from msbench.settings import make_settings

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
    from workloads.registry import get_workload

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
    replay = gil_replay(clock.recorded)
    held_two, _ = run_pipeline(wl, preset, request, 2, plan, clock, two)
    return {"stages": stages, "consumer_segments": consumer, "gil": replay, "bytes_per_sample": size,
            "batch_size": batch, "samples_timed_per_worker_count": plan.repeats * plan.per_segment * batch,
            "held_out": {"1": {"workers": 1, "cores": len(one), "segments": timed["walls"],
                               "runqueue_wait_segments": timed["runqueue_waits"]},
                         "2": {"workers": 2, "cores": len(two), "segments": held_two["walls"],
                               "runqueue_wait_segments": held_two["runqueue_waits"]}}}


def main() -> int:
    return serve(measure)


# --- parent side -----------------------------------------------------------------------------------

def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:                                            # pragma: no cover - not on Linux
        return []


def bottleneck_seconds(entry: Mapping[str, Any]) -> float:
    """The slowest pipeline thread's CPU seconds per sample: what sets a data-bound step."""
    return max(s["cpu_seconds_per_sample"] for s in entry["stages"])


def measure_entry(spec: EntrySpec, beside_others: bool = False, runs: int = 1) -> dict[str, Any]:
    """One entry of the file: `runs` child processes, each measuring it whole, and the median run by its
    bottleneck kept as measured (not a mix of runs). Three back-to-back processes of the YOLO pipeline
    here gave 33, 37 and 42 ms/sample, further apart than one process's own segments, so one process
    understates the spread; with runs > 1 the entry lists every run's bottleneck, date and load."""
    if runs < 1:
        raise UserError(f"--runs={runs} is not allowed; allowed: a whole number >= 1")
    measured = [measure_run(spec, beside_others) for _ in range(runs)]
    chosen = sorted(measured, key=bottleneck_seconds)[(runs - 1) // 2]
    if runs == 1:
        return chosen
    return {**chosen, "command": f"{spec.command()} --runs {runs}",
            "runs": [{"bottleneck_cpu_seconds_per_sample": bottleneck_seconds(e),
                      "measured_at": e["measured_at"], "load_average_before": e["host"]["load_average_before"]}
                     for e in measured]}


def measure_run(spec: EntrySpec, beside_others: bool = False) -> dict[str, Any]:
    """One entry measured now in one child process alone on the host, or (`beside_others`) beside other
    msbench work that does not time anything: the stages' CPU times tolerate that, the held-out
    wall-clock points do not, and the entry says which it was."""
    check_preset(spec.workload, spec.preset, dict(spec.overrides))
    request = {"workload": spec.workload, "preset": spec.preset, "overrides": dict(spec.overrides),
               "data_format": spec.data_format}
    with (shared_host() if beside_others else exclusive_host()):
        load_before = load_average()
        try:
            raw = run_child("hardware.calibration.host_cost", request, TIMEOUT_S)
        except ChildError as err:
            raise RuntimeError(f"host-cost measurement of {spec.key} {err}") from err
        load_after = load_average()
    held_out = {w: {**point, "seconds_per_sample": statistics.median(point["segments"]),
                    "spread": [min(point["segments"]), max(point["segments"])],
                    "runqueue_wait_seconds_per_sample": statistics.median(point["runqueue_wait_segments"])}
                for w, point in raw["held_out"].items()}
    consumer = raw["consumer_segments"]
    return {
        "workload": spec.workload, "preset": spec.preset, "overrides": dict(spec.overrides),
        "data_format": spec.data_format,
        "stages": raw["stages"], "consumer_seconds_per_sample": statistics.median(consumer),
        "consumer_spread": [min(consumer), max(consumer)],
        "gil_fraction": raw["gil"]["gil_fraction"], "gil_replay": raw["gil"], "held_out": held_out,
        "bytes_per_sample": raw["bytes_per_sample"], "batch_size": raw["batch_size"],
        "samples_timed_per_worker_count": raw["samples_timed_per_worker_count"],
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"cpu_model": cpu_model(), "cores": os.cpu_count() or 1, "hostname": socket.gethostname(),
                 "load_average_before": load_before, "load_average_after": load_after,
                 "alone": not beside_others},
        "command": spec.command(),
    }


def read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"schema": SCHEMA, "note": NOTE, "entries": {}}
    return read_calibration(path)[1]               # a truncated or non-object file is one line, not a traceback


def write_file(path: Path, data: Mapping[str, Any]) -> None:
    """Sorted, indented JSON, written atomically (the model hashes these bytes)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, path)


def default_specs(workloads: Sequence[str], presets: Sequence[str], formats: Sequence[str],
                  overrides: Mapping[str, Any], existing: Mapping[str, Any]) -> list[EntrySpec]:
    """Named workloads x presets x formats; with no workload named (`--all`), every entry already in the
    file (or, for an empty file, every workload x tiny/full x both formats)."""
    from workloads.registry import WORKLOADS

    if not workloads and existing and not overrides:
        return [EntrySpec(e["workload"], e["preset"], tuple(sorted(e["overrides"].items())), e["data_format"])
                for e in existing.values()
                if (not presets or e["preset"] in presets) and (not formats or e["data_format"] in formats)]
    if overrides and not workloads:
        raise UserError("--override is not allowed without a WORKLOAD; allowed: "
                        "msbench calibrate host WORKLOAD --override FIELD=VALUE")
    for name in workloads:
        if name not in WORKLOADS:
            raise ConfigError("workload", name, ", ".join(WORKLOADS))
    for fmt in formats:
        if fmt not in DATA_FORMATS:
            raise ConfigError("--data-format", fmt, "|".join(DATA_FORMATS))
    return list(dict.fromkeys(EntrySpec.read_by(w, p, overrides, f)
                              for w in (workloads or list(WORKLOADS)) for p in (presets or DEFAULT_PRESETS)
                              for f in (formats or DATA_FORMATS)))


@dataclass(frozen=True)
class HeldOut:
    """One held-out wall-clock point of an entry and what the law says of it."""

    key: str
    workers: int
    cores: int
    measured_s: float          # wall seconds per sample
    runqueue_wait_s: float     # the pipeline threads' summed waits for a CPU, per sample (load on the host)
    law_s: float

    @property
    def error(self) -> float:
        return self.law_s / self.measured_s - 1.0


def held_out_points(path: Path = CALIBRATION_FILE) -> list[HeldOut]:
    """Every entry's held-out points against the law on this host's cores (core speed 1, no sink: the
    probe iterates in Python)."""
    points = []
    for key, e in sorted(read_file(path)["entries"].items()):
        cost = host_cost(e["workload"], e["preset"], e["overrides"], e["data_format"], path=path)
        for h in e["held_out"].values():
            points.append(HeldOut(key, h["workers"], h["cores"], h["seconds_per_sample"],
                                  h["runqueue_wait_seconds_per_sample"],
                                  per_sample_seconds(h["workers"], h["cores"], False, cost)))
    return points


def print_check(path: Path) -> None:
    points = held_out_points(path)
    for p in points:
        print(f"{p.key:68s} {p.workers}w/{p.cores}c: measured {p.measured_s * 1e3:9.4f} ms/sample "
              f"(run-queue wait {p.runqueue_wait_s * 1e3:8.4f})  law {p.law_s * 1e3:9.4f}  error {p.error * 100:+6.1f}%")
    for workers, cores in sorted({(p.workers, p.cores) for p in points}):
        errors = [abs(p.error) for p in points if (p.workers, p.cores) == (workers, cores)]
        print(f"held-out {workers} worker(s) on {cores} core(s): median |error| {statistics.median(errors) * 100:.1f}% "
              f"over {len(errors)} entries")


def calibrate_host(specs: Sequence[EntrySpec], path: Path = CALIBRATION_FILE, note: str = "",
                   progress: Callable[[str], None] = lambda _line: None, beside_others: bool = False,
                   runs: int = 1) -> dict[str, Any]:
    """Measure `specs` and rewrite `path` after each entry (an interrupted run keeps what it measured).
    `note` (e.g. the conditions of this run) replaces the file's previous one. A file of an older
    schema is rewritten only by a run that re-measures all its entries."""
    data = read_file(path)
    if data.get("schema") != SCHEMA:
        left = sorted(set(data["entries"]) - {s.key for s in specs})
        if left:
            raise UserError(f"{path.name}: schema={data.get('schema')!r} is not allowed for a partial re-measure "
                            f"({len(left)} entries, e.g. {left[0]!r}, would keep the old schema); allowed: "
                            f"`msbench calibrate host --all`, which re-measures every entry as schema {SCHEMA}")
        data = {"entries": {}}
    data["schema"], data["note"] = SCHEMA, f"{NOTE} {note}".strip()
    for spec in specs:
        progress(f"measuring {spec.key} ...")
        entry = measure_entry(spec, beside_others, runs)
        data["entries"][spec.key] = entry
        write_file(path, data)
        if "runs" in entry:
            progress("  bottleneck CPU ms/sample per run: " + ", ".join(
                f"{r['bottleneck_cpu_seconds_per_sample'] * 1e3:.4f}" for r in entry["runs"]) + " (the median run is kept)")
        stages = ", ".join(f"{s['name']} {s['cpu_seconds_per_sample'] * 1e3:.4f}" for s in entry["stages"])
        progress(f"  CPU ms/sample: {stages}; consumer {entry['consumer_seconds_per_sample'] * 1e3:.4f}; "
                 f"GIL share {entry['gil_fraction']:.2f}; held-out wall "
                 f"{entry['held_out']['1']['seconds_per_sample'] * 1e3:.4f} (1w, 1 core), "
                 f"{entry['held_out']['2']['seconds_per_sample'] * 1e3:.4f} (2w, 2 cores)")
    return data


def calibrate_command(args: argparse.Namespace) -> int:
    from msbench.cell import parse_overrides

    path = Path(args.file) if args.file else CALIBRATION_FILE
    if args.what != "host":                                    # argparse restricts it; kept for clarity
        raise UserError(f"what={args.what!r} is not allowed; allowed: host")
    if args.check:
        print_check(path)
        return 0
    if args.all and (args.workloads or args.override):
        raise UserError("--all is not allowed with a WORKLOAD or --override; allowed: --all alone "
                        "(every entry of the file) or WORKLOAD...")
    if not args.all and not args.workloads:
        raise UserError("no WORKLOAD given; allowed: msbench calibrate host WORKLOAD... or --all "
                        "(re-measure every entry of the file)")
    specs = default_specs(args.workloads, args.preset, args.data_format, parse_overrides(args.override),
                          read_file(path)["entries"])
    calibrate_host(specs, path, args.note, progress=lambda line: print(line, flush=True),
                   beside_others=args.beside_others, runs=args.runs)
    print(f"wrote {len(specs)} entries to {path}")
    print_check(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
