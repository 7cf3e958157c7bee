"""`msbench calibrate pipeline-modes [WORKLOAD...]`: measure the data-pipeline tips on this host and
rewrite `hardware/calibration/pipeline_modes.json`, which hardware/model/pipeline_modes.py reads.

Per pipeline (workload x preset x data format), in a child process alone on the host, iterating the
workload's real `make_dataset(...)` the way `msbench calibrate host` does (its ProbePlan and timed
segments, hardware/calibration/host_cost.py):
- thread workers, process workers with shared memory, process workers without, at 1 and 2 workers:
  the model takes the ratios process/thread (the absolute figure stays host_cost.json's);
- the deterministic vision ops (Decode/Resize/Normalize) timed eagerly op by op on the
  split's samples, as a share of the whole eager chain (source read + every op): what
  `augment_device=ascend` moves off the host; and the pixels Decode reads and the ops write.
Per workload, its tiny preset's training step compiled in graph mode on the CPU backend: the first
call at a second, ragged batch size minus a steady call at that size is the compile of a new shape,
divided by the step's op count (extracted, cached) = compile seconds per op.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hardware.calibration.host_cost import DATA_FORMATS, cpu_model, load_average, write_file
from hardware.calibration.host_probe import ProbePlan, PythonClock, timed_segments
from hardware.model.graph import extract_graph
from hardware.model.pipeline_modes import CALIBRATION_FILE, SCHEMA
from msbench.child_io import ChildError, run_child, serve
from msbench.errors import ConfigError, UserError
from msbench.host_share import exclusive_host
from msbench.settings import make_settings
from workloads.registry import WORKLOADS, calibration_entry, get_workload
from workloads.train_step import build_train_step
from workloads.pipeline import DEVICE_VISION_OPS

REPEATS = 3                 # timed segments per mode and worker count (median); 18 segments a pipeline
WORKER_COUNTS = (1, 2)
MODES = {"thread": (False, True), "process": (True, True), "process_no_shm": (True, False)}
VISION_SAMPLES = 16         # samples timed eagerly for the vision-op shares
TIMEOUT_S = 600.0
DEFAULT_PRESETS = ("tiny", "full")
NOTE = ("Measured by `msbench calibrate pipeline-modes`: per pipeline, seconds per sample with thread workers, "
        "process workers with and without shared memory at 1 and 2 workers (median of timed segments, their "
        "min/max in `spread`), the ratios the model reads, the deterministic vision ops' share of the eager "
        "chain; per workload, the CPU backend's compile seconds per op for a new input shape (tiny preset).")


# --- child side ------------------------------------------------------------------------------------

def time_modes(wl: Any, preset_name: str, data_format: str, workdir: Path) -> dict[str, dict[str, list[float]]]:
    """Wall seconds per sample of each timed segment, per mode and worker count (the split cut to the
    timed samples, as `calibrate host` does)."""
    preset = wl.preset(preset_name, {})
    batch = preset.batch_size
    probe = ProbePlan.for_split(preset.train_samples, batch)
    plan = ProbePlan(batch, probe.per_segment, REPEATS, min(preset.train_samples, REPEATS * probe.per_segment * batch))
    if plan.train_samples < preset.train_samples:
        preset = wl.preset(preset_name, {"train_samples": plan.train_samples})
    clock = PythonClock()
    out: dict[str, dict[str, list[float]]] = {}
    for mode, (processes, shm) in MODES.items():
        out[mode] = {}
        for workers in WORKER_COUNTS:
            settings = make_settings({"data_format": data_format, "workers": workers, "prefetch": 1, "seed": 1,
                                      "python_multiprocessing": processes, "shared_mem": shm})
            dataset = wl.make_dataset(preset, "train", settings, batch, workdir=workdir)
            iterator = dataset.repeat(plan.epochs).create_tuple_iterator(output_numpy=True, num_epochs=1)
            next(iterator)
            # every host CPU: the ratio compares modes at the worker count, pinned as calibrate host's 2-worker point
            cpus = set(sorted(os.sched_getaffinity(0))[:workers])
            out[mode][str(workers)] = timed_segments(iterator, plan, clock, cpus)["walls"]
            del iterator, dataset
    return out


def pixels(array: Any) -> int:
    """Height x width of an image array (HWC, or CHW after HWC2CHW)."""
    shape = getattr(array, "shape", ())
    if len(shape) != 3:
        return 0
    return int(shape[1] * shape[2]) if shape[0] in (1, 3) else int(shape[0] * shape[1])


def vision_shares(wl: Any, preset: Any) -> dict[str, Any]:
    """Eager per-op seconds of the train split's map chain: the deterministic vision ops' shares."""
    spec_fn = getattr(wl, "pipeline_spec", None)
    result: dict[str, Any] = {"vision_shares": {}, "stored_pixels": 0, "output_pixels": 0}
    if spec_fn is None:
        return result
    spec = spec_fn(preset, "train")
    per_op: dict[str, float] = {}
    total = 0.0
    for index in range(min(VISION_SAMPLES, len(spec.source))):
        start = time.perf_counter()
        row = dict(zip(spec.columns, spec.source[index]))
        total += time.perf_counter() - start
        for stage in spec.stages:
            value = row[stage.input_columns[0]] if len(stage.input_columns) == 1 else \
                tuple(row[c] for c in stage.input_columns)
            for op in stage.operations:
                start = time.perf_counter()
                value = op(*value) if isinstance(value, tuple) else op(value)
                spent = time.perf_counter() - start
                total += spent
                name = type(op).__name__
                if name in DEVICE_VISION_OPS:
                    per_op[name] = per_op.get(name, 0.0) + spent
                    if name == "Decode":
                        result["stored_pixels"] = pixels(value)
                    result["output_pixels"] = pixels(value)
            if not isinstance(value, tuple):
                row[(stage.output_columns or stage.input_columns)[0]] = value
    result["vision_shares"] = {name: spent / total for name, spent in sorted(per_op.items())}
    return result


def compile_per_shape(wl: Any, preset: Any) -> dict[str, float]:
    """Graph-mode CPU seconds to compile the tiny step for a new (ragged) batch size."""
    import mindspore as ms


    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    step = build_train_step(wl, preset, make_settings({"mode": "graph"}))
    calls: dict[str, float] = {}
    for label, batch in (("first", step.step_batch), ("steady", step.step_batch),
                         ("ragged_first", step.step_batch - 1), ("ragged_steady", step.step_batch - 1)):
        arrays = [ms.Tensor(a) for a in wl.synthetic_batch(preset, batch)]
        start = time.perf_counter()
        step.cell(*arrays).asnumpy()
        calls[label] = time.perf_counter() - start
    return {**{f"{k}_s": v for k, v in calls.items()},
            "compile_s": max(calls["ragged_first"] - calls["ragged_steady"], 0.0)}


def measure(request: Mapping[str, Any]) -> dict[str, Any]:
    wl = get_workload(request["workload"])
    preset = wl.preset(request["preset"], {})
    if request["kind"] == "compile":
        return compile_per_shape(wl, preset)
    return {"segments": time_modes(wl, request["preset"], request["data_format"], Path(request["dump_dir"])),
            **vision_shares(wl, preset)}


def main() -> int:
    return serve(measure)


# --- parent side -----------------------------------------------------------------------------------

def measured(request: Mapping[str, Any], what: str) -> dict[str, Any]:
    """One child measurement alone on the host, with the load around it."""
    with exclusive_host():
        before = load_average()
        try:
            raw = run_child("hardware.calibration.pipeline_modes", dict(request), TIMEOUT_S)
        except ChildError as err:
            raise RuntimeError(f"pipeline-modes measurement of {what} {err}") from err
        after = load_average()
    return {**raw, "host": {"cpu_model": cpu_model(), "cores": os.cpu_count() or 1,
                            "hostname": socket.gethostname(), "load_average_before": before,
                            "load_average_after": after},
            "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def pipeline_entry(workload: str, preset: str, data_format: str) -> dict[str, Any]:
    raw = measured({"kind": "pipeline", "workload": workload, "preset": preset, "data_format": data_format},
                   f"{workload}/{preset}/{data_format}")
    segments = raw.pop("segments")
    medians = {m: {w: statistics.median(s) for w, s in by_w.items()} for m, by_w in segments.items()}
    ratio = {m: {w: medians[m][w] / medians["thread"][w] for w in medians["thread"]} for m in ("process", "process_no_shm")}
    return {**raw, "seconds_per_sample": medians, "segments": segments,
            "spread": {m: {w: [min(s), max(s)] for w, s in by_w.items()} for m, by_w in segments.items()},
            "process_ratio": ratio["process"], "process_no_shm_ratio": ratio["process_no_shm"],
            "command": f"msbench calibrate pipeline-modes {workload} --preset {preset} --data-format {data_format}"}


def compile_entry(workload: str) -> dict[str, Any]:
    raw = measured({"kind": "compile", "workload": workload, "preset": "tiny"}, f"{workload} compile")
    ops = len(extract_graph(workload, "tiny", {}, make_settings({"mode": "graph"})).ops)
    return {**raw, "graph_ops": ops, "compile_s_per_op": raw["compile_s"] / ops,
            "command": f"msbench calibrate pipeline-modes {workload}"}


def read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"schema": SCHEMA, "note": NOTE, "pipelines": {}, "compile": {}}
    return json.loads(path.read_text())


# One workload per pipeline family (JPEG vision ops, YOLO's Python mosaic, text masking); the full presets
# where the claims matrix asks (YOLO full, 33 ms/sample, would take most of the 5-minute budget alone).
DEFAULT_PIPELINES = (("resnet50", "tiny"), ("resnet50", "full"), ("yolov8n", "tiny"), ("bert-base", "tiny"),
                     ("bert-base", "full"))


def calibrate_pipeline_modes(pipelines: Sequence[tuple[str, str]], formats: Sequence[str],
                             path: Path = CALIBRATION_FILE, note: str = "",
                             progress: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Measure the (workload, preset) pipelines and each workload's compile rate; rewrite `path` after each."""
    for name, _preset in pipelines:
        if name not in WORKLOADS:
            raise ConfigError("workload", name, ", ".join(WORKLOADS))
    # the model reads a cell's modes where it reads its host cost (calibration_entry): measure that pipeline
    pipelines = list(dict.fromkeys(calibration_entry(name, preset, {})[:2] for name, preset in pipelines))
    for fmt in formats:
        if fmt not in DATA_FORMATS:
            raise ConfigError("--data-format", fmt, "|".join(DATA_FORMATS))
    data = read_file(path)
    data["schema"], data["note"] = SCHEMA, f"{NOTE} {note}".strip()
    start = time.perf_counter()
    for workload in dict.fromkeys(name for name, _preset in pipelines):
        progress(f"compiling {workload} tiny at a ragged batch ...")
        data["compile"][workload] = compile_entry(workload)
        write_file(path, data)
    for workload, preset in pipelines:
        for fmt in formats:
            progress(f"measuring {workload}/{preset}/{fmt} ...")
            entry = pipeline_entry(workload, preset, fmt)
            data["pipelines"][f"{workload}/{preset}/{fmt}"] = entry
            progress(f"  process/thread {entry['process_ratio']}, without shm {entry['process_no_shm_ratio']}, "
                     f"vision shares {entry['vision_shares']}")
            write_file(path, data)
    data["duration_s"] = round(time.perf_counter() - start, 1)
    write_file(path, data)
    return data


def calibrate_command(args: argparse.Namespace) -> int:
    if getattr(args, "override", None):
        raise UserError("--override is not allowed with pipeline-modes; allowed: the presets' own pipelines")
    path = Path(args.file) if args.file else CALIBRATION_FILE
    pipelines = ([(w, p) for w in args.workloads for p in (args.preset or DEFAULT_PRESETS)] if args.workloads
                 else [(w, p) for w, p in DEFAULT_PIPELINES if not args.preset or p in args.preset])
    start = time.perf_counter()
    data = calibrate_pipeline_modes(pipelines, args.data_format or ("generator",), path, args.note,
                                    progress=lambda line: print(line, flush=True))
    print(f"wrote {len(pipelines)} pipelines to {path} in {time.perf_counter() - start:.0f} s "
          f"(measuring: {data['duration_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
