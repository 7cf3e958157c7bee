"""scenario = "inference" on the real target: the workload's forward network exported to MindIR
(`mindspore.export`), loaded back through MindSpore's own inference path (`mindspore.load` +
`nn.GraphCell`) and called on one batch of the cell's size, timed with the training protocol
(hardware/mindspore/measure.py: first call apart, warm-up, the same stopping rule).

A call's latency is from handing over the batch to having every output on the host. The record keeps
the latency percentiles (p50/p90/p99) and throughput = batch / median latency. MindSpore Lite is used
where its wheel is installed; there is none for this platform on the package mirror here, which the
record says (`extra.mindspore_lite`).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np

from hardware.mindspore import memory
from hardware.mindspore.backend import apply_context, apply_jit, plan_context
from hardware.mindspore.config import MeasureConfig
from hardware.mindspore.resolve import load_workload
from msbench.cell import Cell
from msbench.records import Metrics, Record
from workloads.train_step import apply_amp, micro_batch_size
from hardware.mindspore.measure import measure_steps
from hardware.mindspore.session import pin_threads
from hardware.mindspore.profiling import profile_pass

PERCENTILES = (50, 90, 99)
RUNTIME = "mindspore.load + nn.GraphCell (MindIR)"
LITE_MISSING = ("not used: no mindspore_lite module here (`pip index versions mindspore-lite` finds no wheel "
                "for linux x86_64 / Python 3.11 on this machine's package mirror)")


def latency_percentiles(samples: list[float]) -> dict[str, float]:
    """{"p50", "p90", "p99"} seconds of the call latencies (numpy's linear interpolation)."""
    values = np.percentile(np.asarray(samples, dtype=float), PERCENTILES)
    return {f"p{p}": float(v) for p, v in zip(PERCENTILES, values)}


def lite_status() -> str:
    if importlib.util.find_spec("mindspore_lite") is None:
        return LITE_MISSING
    return "installed, but msbench times MindSpore's own path only (Lite has no CPU test here)"


class Synced:
    """A forward call's outputs, read back to the host by `asnumpy()` (what measure_steps synchronises on)."""

    def __init__(self, outputs: Any) -> None:
        self.outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)

    def asnumpy(self) -> np.ndarray:
        for out in self.outputs:
            out.asnumpy()
        return np.zeros((), dtype=np.float32)


def export_forward(cell: Cell, workdir: Path) -> tuple[Any, list[Any], dict[str, Any]]:
    """Build the cell's forward network (AMP applied, eval mode), export it to MindIR in `workdir` and
    load it back: (GraphCell, input tensors, facts about the export)."""
    import mindspore as ms


    workload = load_workload(cell.workload)
    preset = workload.preset(cell.preset, cell.overrides)
    ms.set_seed(cell.settings.seed)
    network = apply_amp(workload.build_network(preset), cell.settings)
    network.set_train(False)
    batch = micro_batch_size(preset, cell.settings)
    names, _labels = workload.columns(preset)
    inputs = [ms.Tensor(x) for x in workload.synthetic_batch(preset, batch)[:len(names)]]
    path = workdir / "forward"
    started = time.perf_counter()
    ms.export(network, *inputs, file_name=str(path), file_format="MINDIR")
    export_s = time.perf_counter() - started
    mindir = path.with_suffix(".mindir")
    graph_cell = ms.nn.GraphCell(ms.load(str(mindir)))
    facts = {"export_s": export_s, "mindir_bytes": mindir.stat().st_size, "batch_size": batch,
             "params": memory.parameter_bytes(network)}
    return graph_cell, inputs, facts


def run_inference(cell: Cell, device: str, config: MeasureConfig, profile_dir: Path | None) -> Record:
    """Measure one inference cell in this process (the target's isolated child)."""
    plan = plan_context(cell.settings, device)
    apply_context(plan)
    extra: dict[str, Any] = pin_threads(plan)
    workdir = Path.cwd()          # the child's scratch folder: the MindIR goes with it
    with memory.PeakRSS() as rss:
        graph_cell, inputs, facts = export_forward(cell, workdir)
        apply_jit(graph_cell, plan)

        def call(*batch: Any) -> Synced:
            return Synced(graph_cell(*batch))

        measurement = measure_steps(lambda: tuple(inputs), call, config)
    run_once = lambda: call(*inputs).asnumpy()  # noqa: E731 - one synchronised call
    op_profile: dict[str, Any] = {}
    pool_peak = None
    if profile_dir is not None:
        profiled = profile_pass(run_once, profile_dir, device)
        op_profile, pool_peak = profiled.summary, profiled.pool_peak
    elif not plan.device_memory_counters and config.memory_profile_steps:
        pool_peak = memory.profiled_pool_peak(run_once, config.memory_profile_steps, workdir / "memory-profile")
    stats = measurement.stats
    batch = facts["batch_size"]
    mem = memory.report(rss=rss, params=facts.pop("params"), pool_peak=pool_peak, device_peak=None)
    extra.update(facts, scenario="inference", runtime=RUNTIME, mindspore_lite=lite_status(), device=device,
                 stop_reason=measurement.stop_reason, first_step_s=measurement.first_step_s,
                 warmup_s=measurement.warmup, global_samples_per_step=batch)
    metrics = Metrics(step_time_s=stats.median, step_time_stats=stats, throughput=batch / stats.median,
                      throughput_per_device=batch / stats.median, latency_s=latency_percentiles(stats.samples),
                      peak_memory_bytes=mem.headline_bytes, peak_memory_source=mem.source,
                      peak_memory_detail=mem.detail, compile_time_s=measurement.compile_s,
                      breakdown={"data_wait": measurement.data_s, "compute": max(0.0, stats.median - measurement.data_s)},
                      op_profile=op_profile, extra=extra)
    return Record(cell=cell, status="ok", metrics=metrics)
