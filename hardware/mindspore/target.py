"""`mindspore:<device>`: run a cell for real, every knob applied, in the runner's isolated child.

`supports` runs in the runner's parent and never imports MindSpore; `run` runs in the child
(`python -m msbench.worker`, scratch working directory), may set MindSpore's global context, and
turns a MindSpore out-of-memory error into an `oom` record. Multi-device cells go through msrun.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hardware.mindspore.accuracy import ACCURACY_SEEDS, accuracies_in_subprocess, not_run_reason, seed_cells
from hardware.mindspore.backend import unsupported_reason
from hardware.mindspore.config import MeasureConfig, check_device
from hardware.mindspore.dataset_cache import cache_binary
from msbench.cell import Cell
from msbench.errors import ConfigError
from hardware.scenarios import scenario_refusal
from msbench.freshness import files_digest, fingerprint, recorded_options
from msbench.records import Record
from msbench.provenance import package_version
from msbench.resources import suite_path
from workloads.registry import workload_sources
from hardware.mindspore.session import is_mindspore_oom
from hardware.mindspore.inference import run_inference
from hardware.mindspore.distributed import run_distributed
from hardware.mindspore.dataset_cache import DatasetCacheServer
from hardware.mindspore.measure import process_stop_reason
from hardware.mindspore.measure import make_metrics, per_step, process_stats
from hardware.mindspore.inference import latency_percentiles
from hardware.mindspore.session import run_session


# Extra fields that describe one measured process, kept per process in a combined record.
PER_PROCESS_EXTRA = ("stop_reason", "first_step_s", "warmup_s", "rank_medians", "loss_first", "loss_last",
                     "conditions")


class MindSporeTarget:
    isolate = True

    def __init__(self, device: str, accuracy: bool = False, config: MeasureConfig | None = None,
                 accuracy_seeds: int = ACCURACY_SEEDS, profile_dir: str | None = None,
                 accuracy_knobs: tuple[str, ...] | None = None) -> None:
        self.device = check_device(device)
        self.profile_dir = profile_dir      # `--profile` / matrix `profile = true`: the Profiler's output root
        self.name = f"mindspore:{device}"
        self.accuracy = accuracy
        self.accuracy_seeds = accuracy_seeds
        self.accuracy_knobs = accuracy_knobs          # matrix key: numerics knobs that get accuracy runs
        self.config = config or MeasureConfig.from_env()

    def supports(self, cell: Cell) -> str | None:
        reason = scenario_refusal(cell.settings, cell.scenario) or unsupported_reason(cell.settings, self.device)
        if reason is None and cell.settings.cache and not cache_binary().exists():
            reason = f"cache=true needs MindSpore's dataset-cache server binary ({cache_binary()} is missing)"
        return reason

    def fingerprint(self, cell: Cell) -> str:
        """What determines this target's numbers besides the host: the real target's sources, the capability
        table and settings rules, the workload's sources, MindSpore's version, the device, the options that
        change the record (accuracy and its seeds, the Profiler)."""
        here = Path(__file__).resolve().parent
        sources = [*here.glob("*.py"), here.parent / "capabilities.py", suite_path("msbench/settings.py"),
                   suite_path("workloads/parallel_plan.py"), *workload_sources(cell.workload)]
        return fingerprint("mindspore", files_digest(sources), package_version("mindspore"), self.device,
                           recorded_options(self.accuracy, self.accuracy_seeds, self.accuracy_knobs,
                                            self.profile_dir is not None))

    def run(self, cell: Cell) -> Record:
        reason = self.supports(cell)     # also checked here: `run` may be called without the runner
        if reason:
            return Record(cell=cell, status="unsupported", reason=reason)
        try:
            with self._dataset_cache(cell):
                if cell.scenario == "inference":
                    record = run_inference(cell, self.device, self.config, self.cell_profile_dir(cell))
                elif cell.settings.devices > 1:
                    record = run_distributed(cell, self.device, self.config)
                    if self.profile_dir:
                        record.metrics.op_profile = {"reason": "not profiled: the Profiler runs on one-device cells "
                                                               "only (msrun ranks are not profiled)"}
                else:
                    record = self._run_local(cell)
        except Exception as err:  # noqa: BLE001 - only MindSpore's OOM is turned into a record here
            if is_mindspore_oom(err):
                return Record(cell=cell, status="oom", reason=f"{type(err).__name__}: {str(err).strip()[-1500:]}")
            raise
        if record.status == "ok" and self.accuracy:
            add_accuracy(record, self.accuracy_seeds, self.accuracy_knobs)
        return record

    @staticmethod
    def _dataset_cache(cell: Cell) -> AbstractContextManager:
        """MindSpore's cache server for the cell's lifetime when `cache=true` (msrun ranks inherit its env)."""
        if not cell.settings.cache:
            return nullcontext()

        return DatasetCacheServer(log_dir=Path.cwd() / "dataset-cache-log")

    def process_stop(self, records: Sequence[Record]) -> str | None:
        """msbench.repeat's question: enough fresh processes for this cell? (measure.process_stop_reason)"""
        return process_stop_reason([r.metrics.step_time_s for r in records], self.config)

    def combine_processes(self, cell: Cell, records: Sequence[Record], reason: str) -> Record:
        """One record from the cell's process records: step time and interval over the process medians,
        throughput from that median, compile and data wait their medians, the largest memory peak."""
        stats = process_stats([r.metrics.step_time_stats for r in records])
        first = records[0].metrics
        median = stats.median
        compile_s = float(np.median([r.metrics.compile_time_s for r in records]))
        data_s = float(np.median([r.metrics.breakdown.get("data_wait", 0.0) for r in records]))
        peak = max(records, key=lambda r: r.metrics.peak_memory_bytes or 0).metrics
        own = [k for k in PER_PROCESS_EXTRA if k in first.extra]
        extra = {k: v for k, v in first.extra.items() if k not in own}
        extra.update(process_stop_reason=reason, processes=[
            {"median_s": r.metrics.step_time_s, "steps": len(r.metrics.step_time_stats.samples),
             "compile_s": r.metrics.compile_time_s, **{k: r.metrics.extra.get(k) for k in own}} for r in records])
        metrics = replace(first, step_time_s=median, step_time_stats=stats,
                          throughput=first.throughput * first.step_time_s / median,
                          throughput_per_device=first.throughput_per_device * first.step_time_s / median,
                          peak_memory_bytes=peak.peak_memory_bytes, peak_memory_source=peak.peak_memory_source,
                          peak_memory_detail=peak.peak_memory_detail, compile_time_s=compile_s,
                          breakdown={"data_wait": data_s, "compute": max(0.0, median - data_s)}, extra=extra)
        if cell.scenario == "inference":       # percentiles of every process's calls

            metrics = replace(metrics, latency_s=latency_percentiles(stats.samples))
        with_accuracy = next((r for r in records if r.metrics.accuracy is not None), None)
        if with_accuracy is not None:
            metrics = replace(metrics, accuracy=with_accuracy.metrics.accuracy,
                              accuracy_metric=with_accuracy.metrics.accuracy_metric)
            metrics.extra["accuracy_run"] = with_accuracy.metrics.extra.get("accuracy_run")
        return Record(cell=cell, status="ok", metrics=metrics)

    def cell_profile_dir(self, cell: Cell) -> Path | None:
        """Where this cell's Profiler output goes (None: not profiled)."""
        return Path(self.profile_dir) / cell.id if self.profile_dir else None

    def _run_local(self, cell: Cell) -> Record:
        result = run_session(cell, self.device, self.config, profile_dir=self.cell_profile_dir(cell))
        if result.unsupported:
            return Record(cell=cell, status="unsupported", reason=result.unsupported)
        m = result.measurement
        metrics = make_metrics(stats=per_step(m.stats, result.steps_per_call), data_s=m.data_s / result.steps_per_call,
                               compile_s=m.compile_s, global_samples=result.global_samples,
                               step_batch=result.step_batch, memory=result.memory,
                               extra={**result.extra, "steps_per_call": result.steps_per_call, "device": self.device})
        metrics.op_profile = result.op_profile
        return Record(cell=cell, status="ok", metrics=metrics)


def add_accuracy(record: Record, seeds: int = ACCURACY_SEEDS, knobs: tuple[str, ...] | None = None,
                 threads: int | None = None) -> None:
    """Fill metrics.accuracy with the mean over `seeds` (cached) accuracy-preset training runs, seeds
    seed, seed + 1, ...; the per-seed values stay in extra.accuracy_run for the runner's seed-paired
    delta. `knobs` (the matrix's accuracy_knobs) limits which numerics get runs; `threads`, the child's CPU op
    threads (None: the host's CPUs). Used by the device-model target too."""
    skipped = not_run_reason(record.cell.settings, knobs)
    if skipped:
        record.metrics.extra["accuracy_run"] = {"reason": skipped}
        return

    started = time.monotonic()
    try:
        results = accuracies_in_subprocess(seed_cells(record.cell, seeds), threads=threads)
    except ConfigError as err:   # no tiny-preset equivalent (e.g. 4096 devices as micro-batches)
        record.metrics.extra["accuracy_run"] = {"reason": f"accuracy run impossible: {err}"}
        return
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        # the step was measured; a failed accuracy run leaves accuracy empty with its reason, never a guess
        record.metrics.extra["accuracy_run"] = {"reason": f"accuracy run failed: {str(err)[-1500:]}"}
        return
    # where `make bench` spends its time: each seed's training in the child (0 when cached), and the whole step
    seconds = [0.0 if r.cached else r.train_s for r in results]
    cpu = [0.0 if r.cached else r.cpu_s for r in results]
    total_s = round(time.monotonic() - started, 2)
    first = results[0]
    info: dict[str, Any] = {"key": first.key, "keys": [r.key for r in results], "cached": all(r.cached for r in results),
                            "epochs": first.epochs, "steps": first.steps, "samples_seen": first.samples_seen,
                            "seeds": [c.settings.seed for c in seed_cells(record.cell, seeds)],
                            "values": [r.value for r in results], "lr_rule": first.lr_rule, "wall_s": seconds,
                            "cpu_s": cpu, "preset": first.preset, "total_s": total_s}
    record.metrics.accuracy_metric = first.metric
    missing = next((r for r in results if r.value is None), None)
    if missing is not None:
        info["reason"] = missing.reason
    else:
        values = [float(r.value) for r in results]  # type: ignore[arg-type]
        record.metrics.accuracy = sum(values) / len(values)
    if first.losses:
        info["loss_first"], info["loss_last"] = first.losses[0], first.losses[-1]
    record.metrics.extra["accuracy_run"] = info
