"""MindSpore's Profiler over extra steps of a real run, and the per-op summary of what it wrote.

The profiled steps run after the measured ones, in a separate pass, so the Profiler's overhead never
enters the timed step metrics. The output folder stays beside the run's records (`<run>.profiles/<cell
id>/`); the summary (hardware/model/op_times.py's shape) goes into the record. MindSpore 2.10 writes, on
the CPU, `FRAMEWORK/cpu_op_type_info_<rank>.csv` (per op type: occurrences and total time in ms over the
profiled steps) and `FRAMEWORK/cpu_op_detail_info_<rank>.csv` (per op instance) in a folder
`<host>_<pid>_<time>_ascend_ms` (the name says "ascend" on the CPU too); reference mindspore-2.10-cpu.md §4.
On Ascend and GPU the Profiler writes other files, which this parser does not read yet: such a summary
carries the reason instead of numbers.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hardware.mindspore.memory import pool_peak_from_record
from hardware.model.op_times import op_profile

PROFILE_STEPS = 3          # steps under the Profiler; its per-op times are averaged over them
SOURCE = "mindspore.profiler (cpu_op_type_info, cpu_op_detail_info)"


@dataclass(frozen=True)
class ProfiledPass:
    run_dir: Path | None               # the folder the Profiler wrote for this pass
    pool_peak: int | None              # the CPU memory pool's peak (hardware.mindspore.memory)
    summary: dict[str, Any]            # metrics.op_profile


def activities(device: str) -> list[Any]:
    from mindspore.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.NPU] if device == "ascend" else
                                     [ProfilerActivity.GPU] if device == "gpu" else [])


def profile_pass(run_step: Callable[[], object], out_dir: Path, device: str,
                 steps: int = PROFILE_STEPS) -> ProfiledPass:
    """Run `steps` calls of `run_step` (each synchronised) under the Profiler, writing into `out_dir`."""
    from mindspore.profiler import profile, schedule, tensorboard_trace_handler

    out_dir.mkdir(parents=True, exist_ok=True)
    before = set(out_dir.iterdir())
    with profile(activities=activities(device), profile_memory=True, record_shapes=True,
                 schedule=schedule(wait=0, warmup=0, active=steps, repeat=1, skip_first=0),
                 on_trace_ready=tensorboard_trace_handler(str(out_dir))) as prof:
        for _ in range(steps):
            run_step()
            prof.step()
    new = sorted(p for p in set(out_dir.iterdir()) - before if p.is_dir())
    run_dir = new[-1] if new else None
    if run_dir is None:
        return ProfiledPass(None, None, {"reason": f"the Profiler wrote no folder under {out_dir}"})
    return ProfiledPass(run_dir, pool_peak_from_record(run_dir), op_summary(run_dir, steps))


def op_summary(run_dir: Path, steps: int) -> dict[str, Any]:
    """The per-op summary of one Profiler folder whose numbers cover `steps` steps."""
    types = sorted(run_dir.glob("FRAMEWORK/cpu_op_type_info_*.csv"))
    details = sorted(run_dir.glob("FRAMEWORK/cpu_op_detail_info_*.csv"))
    if not types:
        return {"reason": f"no FRAMEWORK/cpu_op_type_info_*.csv in {run_dir} (only the CPU's files are parsed)",
                "dir": str(run_dir)}
    by_type: dict[str, tuple[float, float]] = {}
    for row in read_csv(types[0]):
        by_type[row["op_type"]] = (float(row["total_compute_time"]) / 1e3 / steps,
                                   float(row["type_occurrences"]) / steps)
    instances = [(row["full_op_name"], row["op_type"], float(row["op_total_time(ms)"]) / 1e3 / steps)
                 for row in (read_csv(details[0]) if details else [])]
    return {**op_profile(by_type, instances, steps, SOURCE), "dir": str(run_dir)}


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
