"""One measured training session of a cell in this process (one rank of it when data-parallel).

Sets the context, builds the step through workloads.train_step, feeds it from the workload's real
dataset pipeline, runs the measurement protocol and the memory probes, and returns plain numbers.
The caller (the target, or one msrun rank) turns them into a Record.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hardware.capabilities import Facts, refusal
from hardware.mindspore import memory
from hardware.mindspore.backend import ContextPlan, apply_context, apply_jit, op_threads, plan_context
from hardware.mindspore.config import MeasureConfig
from hardware.mindspore.measure import Measurement, measure_steps, stop_reason
from hardware.mindspore.resolve import load_workload
from msbench.cache import cache_dir
from msbench.cell import Cell
from workloads.parallel_plan import plan_parallel
from workloads.train_step import build_train_step
from workloads.pipeline import ragged_last_batch
from hardware.mindspore.profiling import profile_pass

MS_OOM_MARKERS = ("Memory not enough", "Memory isn't enough", "alloc failed", "Allocate memory failed")


@dataclass
class SessionResult:
    """Numbers of one session. `unsupported` is set (and nothing measured) when a knob had no effect."""

    unsupported: str | None = None
    measurement: Measurement | None = None
    steps_per_call: int = 1                 # > 1 under dataset sink: one call runs a whole sink round
    step_batch: int = 0                     # samples per device per optimizer update
    global_samples: int = 0                 # samples per optimizer update, all devices
    memory: memory.MemoryReport | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    op_profile: dict[str, Any] = field(default_factory=dict)    # the Profiler pass's summary (profile_dir set)


def is_mindspore_oom(err: BaseException) -> bool:
    return isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and any(m in str(err) for m in MS_OOM_MARKERS))


def pin_threads(plan: ContextPlan) -> dict[str, Any]:
    """Pin the process to its CPU set and fix MindSpore's op thread count to it; both are recorded."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus)
    return {"cpu_affinity": cpus, "op_threads": op_threads(),
            "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def sink_steps_per_call(plan: ContextPlan, epoch_steps: int) -> int:
    """Optimizer steps per call of a `ms.data_sink` function: `sink_size`, or a whole epoch for -1."""
    if not plan.sink:
        return 1
    return plan.sink_size if plan.sink_size > 0 else max(1, epoch_steps)


def step_driver(plan: ContextPlan, cell: Any, data: Any) -> tuple[Callable[[], tuple], Callable[..., Any], int]:
    """(fetch, step, steps per call). Without sink the host pulls each batch from the pipeline; with sink
    (Ascend/GPU) `ms.data_sink` has the device pull `sink_size` batches per call."""
    if plan.sink:
        import mindspore as ms

        per_call = sink_steps_per_call(plan, data.get_dataset_size())
        jit = ms.JitConfig(jit_level=plan.jit_level) if plan.jit_level else None
        return (lambda: ()), ms.data_sink(cell, data, sink_size=per_call, jit_config=jit), per_call
    iterator = data.repeat().create_tuple_iterator(num_epochs=1)
    return (lambda: next(iterator)), cell, 1


def run_session(cell: Cell, device: str, config: MeasureConfig, *, rank: int = 0, world: int = 1,
                stop: Callable[..., str | None] = stop_reason, context_applied: bool = False,
                profile_dir: Path | None = None) -> SessionResult:
    """Build, measure and probe memory for `cell` on `device` in this process. A data-parallel rank
    passes its agreed `stop` rule and sets the context itself (before the collective's `init()`).
    With `profile_dir`, the memory pass after the measured steps runs under MindSpore's full Profiler
    (hardware/mindspore/profiling.py), whose output stays there."""
    plan = plan_context(cell.settings, device)
    if not context_applied:
        apply_context(plan)
    extra = pin_threads(plan)
    workload = load_workload(cell.workload)
    preset = workload.preset(cell.preset, cell.overrides)
    with memory.PeakRSS() as rss:
        step = build_train_step(workload, preset, cell.settings)

        # the capability table's refusals known once the step is built (as the device model's after extraction)
        refused = refusal(cell.settings, f"mindspore:{device}",
                         Facts(marked_blocks=step.recomputed_blocks,
                               ragged_last_batch=ragged_last_batch(preset, cell.settings)))
        if refused:
            return SessionResult(unsupported=refused)
        apply_jit(step.cell, plan)
        parallel = plan_parallel(cell.settings, world)
        shard, shards = parallel.data_shard(rank, world)
        data = workload.make_dataset(preset, "train", cell.settings, parallel.loaded_batch(step.step_batch),
                                     rank=shard, world=shards, workdir=cache_dir("datasets"))
        fetch, run_step, per_call = step_driver(plan, step.cell, data)
        if plan.device_memory_counters:
            memory.device_counters_reset()
        measurement = measure_steps(fetch, run_step, config, stop=stop)
        device_peak = memory.device_max_allocated() if plan.device_memory_counters else None
    pool_peak, op_profile = None, {}
    if profile_dir is not None:
        profiled = profile_pass(lambda: run_step(*fetch()).asnumpy(), profile_dir, device)
        op_profile = profiled.summary
        pool_peak = None if plan.device_memory_counters else profiled.pool_peak
    elif not plan.device_memory_counters and config.memory_profile_steps:
        pool_peak = memory.profiled_pool_peak(lambda: run_step(*fetch()).asnumpy(), config.memory_profile_steps,
                                              Path(tempfile.mkdtemp(prefix=f"profile-rank{rank}-", dir=".")))
    extra.update(memory_pool={k: v for k, v in (("optimize_level", plan.memory_optimize_level),
                                                ("max_size", plan.max_memory)) if v},
                 amp_effective=step.amp, recomputed_blocks=step.recomputed_blocks, stop_reason=measurement.stop_reason,
                 warmup_s=measurement.warmup, first_step_s=measurement.first_step_s,
                 loss_first=measurement.losses[0], loss_last=measurement.losses[-1])
    return SessionResult(measurement=measurement, steps_per_call=per_call, step_batch=step.step_batch,
                         global_samples=step.global_samples,
                         memory=memory.report(rss=rss, params=memory.parameter_bytes(step.cell), pool_peak=pool_peak,
                                              device_peak=device_peak),
                         extra=extra, op_profile=op_profile)
