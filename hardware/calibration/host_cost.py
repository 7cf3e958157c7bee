"""`msbench calibrate host [WORKLOAD...]`: measure the data pipelines on this host and rewrite
`hardware/calibration/host_cost.json`, the file the device model reads (hardware/model/host_cost.py).

This is the only place that times the host. Each entry (workload x preset x overrides x data format)
is measured in a child process, alone on the host (msbench.host_share), by iterating the workload's
real `make_dataset(...)`:

- at 1 and at 2 pipeline workers (prefetch 1, so a queue filled while idle cannot flatter it): the
  two points of the scaling law `hardware/model/host_time.py` extrapolates from;
- the part of the 1-worker time spent inside Python callables (the generator source, Python map
  operations, per-batch maps): their threads' CPU time, from a wrapper around each callable the
  pipeline hands to MindSpore. Recorded, not taken as the serial part: Python bytecode holds the GIL,
  but the callables spend most of their time in numpy/PIL C code that releases it (YOLOv5s full: 37.6
  of 38.5 ms/sample inside callables, yet 21.7 ms/sample at 2 workers), so the scaling law reads the
  serial part from the two measured points alone.

The workloads' sources render and encode each sample once, then serve the stored bytes (as a
reader of files would), so the first epoch (generation, pipeline start-up, MindRecord open) is
excluded; each figure is the median over a few timed segments of whole batches of later epochs,
each at least `MIN_SAMPLES` samples. The split is cut to the timed samples: the cost per sample
does not depend on its length.
"""

from __future__ import annotations

import argparse
import datetime
import json
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

from hardware.model.extract import ChildError, run_child
from hardware.model.graph import check_preset
from hardware.model.host_cost import CALIBRATION_FILE, SCHEMA, entry_key
from msbench.errors import ConfigError, UserError
from msbench.host_share import exclusive_host

REPEATS = 5                 # timed segments per worker count; the median is reported
MIN_SAMPLES = 64            # samples per timed segment (whole batches: one ResNet-50 batch of 256)
WORKER_COUNTS = (1, 2)
TIMEOUT_S = 900.0
DATA_FORMATS = ("generator", "mindrecord")
DEFAULT_PRESETS = ("tiny", "full")
NOTE = ("Measured on the reference machine kind by `msbench calibrate host`. Per entry: seconds per sample "
        "at 1 and 2 pipeline workers (median of the timed segments in `segments`), the 1-worker seconds spent "
        "in Python callables (recorded, not the serial part), bytes per sample, the host and its load average "
        "around the "
        "measurement, and the command.")


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
    """CPU seconds of the calling threads inside the Python callables the pipeline hands to MindSpore
    (a thread-safe sum). Thread CPU time, not wall time: a callable waiting for the GIL held by another
    pipeline thread would otherwise be counted twice (at 1 worker, the source and the map run in
    different threads and their wall times added up to more than the pipeline's own)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args)
            finally:
                spent = time.thread_time() - start
                with self._lock:
                    self.seconds += spent
        return call


class TimedSource:
    """A random-access source whose `__getitem__` is timed (GeneratorDataset calls it in Python)."""

    def __init__(self, source: Any, clock: PythonClock) -> None:
        self._source, self._getitem = source, clock.timed(source.__getitem__)

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> Any:
        return self._getitem(index)


def instrument_python_stages(clock: PythonClock) -> None:
    """Wrap every Python callable given to GeneratorDataset, `map` and `batch(per_batch_map=)` (child only)."""
    import mindspore.dataset as ds
    from mindspore.dataset.transforms.transforms import TensorOperation

    generator, map_, batch = ds.GeneratorDataset, ds.Dataset.map, ds.Dataset.batch

    class TimedGeneratorDataset(generator):  # type: ignore[misc, valid-type]
        def __init__(self, source: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(TimedSource(source, clock), *args, **kwargs)

    def timed_map(self: Any, operations: Any = None, *args: Any, **kwargs: Any) -> Any:
        ops = operations if isinstance(operations, list) else [operations]
        wrapped = [op if isinstance(op, TensorOperation) or not callable(op) else clock.timed(op) for op in ops]
        return map_(self, wrapped, *args, **kwargs)

    def timed_batch(self: Any, *args: Any, per_batch_map: Any = None, **kwargs: Any) -> Any:
        if per_batch_map is not None:
            kwargs["per_batch_map"] = clock.timed(per_batch_map)
        return batch(self, *args, **kwargs)

    ds.GeneratorDataset = TimedGeneratorDataset
    ds.Dataset.map, ds.Dataset.batch = timed_map, timed_batch


def timed_segments(iterator: Iterator[Any], plan: ProbePlan, clock: PythonClock) -> tuple[list[float], list[float]]:
    """Per timed segment: wall seconds per sample, and Python seconds per sample (after the first batch)."""
    for _ in range(plan.epoch_batches - 1):                     # the rest of the untimed first epoch
        next(iterator)
    walls, pythons = [], []
    samples = plan.per_segment * plan.batch
    for _ in range(plan.repeats):
        python_before, start = clock.seconds, time.perf_counter()
        for _ in range(plan.per_segment):
            next(iterator)
        walls.append((time.perf_counter() - start) / samples)
        pythons.append((clock.seconds - python_before) / samples)
    return walls, pythons


def measure(request: Mapping[str, Any]) -> dict[str, Any]:
    """Iterate the real pipeline at each worker count (child side)."""
    from msbench.settings import make_settings
    from workloads.registry import get_workload

    clock = PythonClock()
    instrument_python_stages(clock)
    wl = get_workload(request["workload"])
    preset = wl.preset(request["preset"], request["overrides"])
    batch = preset.batch_size
    plan = ProbePlan.for_split(preset.train_samples, batch)
    if plan.train_samples < preset.train_samples:
        preset = wl.preset(request["preset"], {**request["overrides"], "train_samples": plan.train_samples})
    result: dict[str, Any] = {"segments": {}, "python_segments": {}, "batch_size": batch,
                              "samples_timed_per_worker_count": plan.repeats * plan.per_segment * batch}
    for workers in WORKER_COUNTS:
        settings = make_settings({"data_format": request["data_format"], "workers": workers, "prefetch": 1,
                                  "seed": 1})
        dataset = wl.make_dataset(preset, "train", settings, batch, workdir=Path(request["dump_dir"]))
        iterator = dataset.repeat(plan.epochs).create_tuple_iterator(output_numpy=True, num_epochs=1)
        first = next(iterator)
        result["bytes_per_sample"] = int(sum(column.nbytes for column in first) // batch)
        walls, pythons = timed_segments(iterator, plan, clock)
        result["segments"][str(workers)] = walls
        result["python_segments"][str(workers)] = pythons
    return result


def main() -> int:
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    request = json.loads(sys.stdin.read())
    Path(request["out"]).write_text(json.dumps(measure(request), sort_keys=True))
    return 0


# --- parent side -----------------------------------------------------------------------------------

def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:                                            # pragma: no cover - not on Linux
        return []


def measure_entry(spec: EntrySpec) -> dict[str, Any]:
    """One entry of the file, measured now in a child process alone on the host."""
    check_preset(spec.workload, spec.preset, dict(spec.overrides))
    request = {"workload": spec.workload, "preset": spec.preset, "overrides": dict(spec.overrides),
               "data_format": spec.data_format}
    with exclusive_host():
        load_before = load_average()
        try:
            raw = run_child("hardware.calibration.host_cost", request, TIMEOUT_S)
        except ChildError as err:
            raise RuntimeError(f"host-cost measurement of {spec.key} {err}") from err
        load_after = load_average()
    medians = {w: statistics.median(s) for w, s in raw["segments"].items()}
    return {
        "workload": spec.workload, "preset": spec.preset, "overrides": dict(spec.overrides),
        "data_format": spec.data_format,
        "seconds_per_sample": medians,
        "python_seconds_per_sample": statistics.median(raw["python_segments"]["1"]),
        "spread": {w: [min(s), max(s)] for w, s in raw["segments"].items()},
        "segments": raw["segments"], "python_segments": raw["python_segments"],
        "bytes_per_sample": raw["bytes_per_sample"], "batch_size": raw["batch_size"],
        "samples_timed_per_worker_count": raw["samples_timed_per_worker_count"],
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"cpu_model": cpu_model(), "cores": os.cpu_count() or 1, "hostname": socket.gethostname(),
                 "load_average_before": load_before, "load_average_after": load_after},
        "command": spec.command(),
    }


def read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"schema": SCHEMA, "note": NOTE, "entries": {}}
    return json.loads(path.read_text())


def write_file(path: Path, data: Mapping[str, Any]) -> None:
    """Sorted, indented JSON, written atomically (the model hashes these bytes)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, path)


def default_specs(workloads: Sequence[str], presets: Sequence[str], formats: Sequence[str],
                  overrides: Mapping[str, Any], existing: Mapping[str, Any]) -> list[EntrySpec]:
    """Named workloads x presets x formats; with no workload named, every entry already in the file
    (or, for an empty file, every workload x tiny/full x both formats)."""
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
    return [EntrySpec(w, p, tuple(sorted(overrides.items())), f)
            for w in (workloads or list(WORKLOADS)) for p in (presets or DEFAULT_PRESETS)
            for f in (formats or DATA_FORMATS)]


def calibrate_host(specs: Sequence[EntrySpec], path: Path = CALIBRATION_FILE, note: str = "",
                   progress: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Measure `specs` and rewrite `path` after each entry (an interrupted run keeps what it measured).
    `note` (e.g. the conditions of this run) replaces the file's previous one."""
    data = read_file(path)
    data["schema"], data["note"] = SCHEMA, f"{NOTE} {note}".strip()
    for spec in specs:
        progress(f"measuring {spec.key} ...")
        entry = measure_entry(spec)
        data["entries"][spec.key] = entry
        write_file(path, data)
        progress(f"  {entry['seconds_per_sample']['1'] * 1e3:.4f} ms/sample at 1 worker, "
                 f"{entry['seconds_per_sample']['2'] * 1e3:.4f} at 2, Python "
                 f"{entry['python_seconds_per_sample'] * 1e3:.4f}")
    return data


def calibrate_command(args: argparse.Namespace) -> int:
    from msbench.cli import parse_overrides

    path = Path(args.file) if args.file else CALIBRATION_FILE
    if args.what != "host":                                    # argparse restricts it; kept for clarity
        raise UserError(f"what={args.what!r} is not allowed; allowed: host")
    specs = default_specs(args.workloads, args.preset, args.data_format, parse_overrides(args.override),
                          read_file(path)["entries"])
    calibrate_host(specs, path, args.note, progress=lambda line: print(line, flush=True))
    print(f"wrote {len(specs)} entries to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
