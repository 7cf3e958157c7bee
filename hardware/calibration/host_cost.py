"""`msbench calibrate host [WORKLOAD...] | --all`: measure the data pipelines on this host and rewrite
`hardware/calibration/host_cost.json`, the file the device model reads (hardware/model/host_cost.py).

This is the only place that times the host. Each entry (workload x preset x overrides x data format)
is measured in a child process (hardware/calibration/host_probe.py), alone on the host (msbench.host_share), by iterating the workload's
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
import datetime
import json
import os
import platform
import socket
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hardware.model.graph import check_preset
from hardware.model.host_cost import CALIBRATION_FILE, SCHEMA, entry_key, host_cost, read_calibration
from hardware.model.host_time import per_sample_seconds
from msbench.cell import parse_overrides
from msbench.child_io import ChildError, run_child
from msbench.errors import ConfigError, UserError
from msbench.host_share import exclusive_host, shared_host
from workloads.registry import WORKLOADS, calibration_entry, check_workload

TIMEOUT_S = 900.0
DATA_FORMATS = ("generator", "mindrecord")
DEFAULT_PRESETS = ("tiny", "full")
NOTE = ("Measured on the reference machine kind by `msbench calibrate host --all`. Schema 2, per entry: the "
        "CPU seconds per sample of each pipeline thread at 1 worker (`stages`, median over timed segments, "
        "with the Python-callable part), the consumer's, the GIL-held share of the Python callables "
        "(`gil_fraction`, from a replay in 1 and 2 threads), the held-out wall seconds per sample at 1 worker "
        "on 1 core and 2 workers on 2 cores (`held_out`), bytes per sample, the host and its load average "
        "around the measurement, and the command.")


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
            raw = run_child("hardware.calibration.host_probe", request, TIMEOUT_S)
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
    if not workloads and existing and not overrides:
        return [EntrySpec(e["workload"], e["preset"], tuple(sorted(e["overrides"].items())), e["data_format"])
                for e in existing.values()
                if (not presets or e["preset"] in presets) and (not formats or e["data_format"] in formats)]
    if overrides and not workloads:
        raise UserError("--override is not allowed without a WORKLOAD; allowed: "
                        "msbench calibrate host WORKLOAD --override FIELD=VALUE")
    for name in workloads:          # a built-in or zoo name (a zoo recipe's own pipeline has its own entry)
        check_workload(name, (), "msbench calibrate host")
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
