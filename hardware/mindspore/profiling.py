"""MindSpore's Profiler over extra steps of a real run, and the per-op summary of what it wrote.

The profiled steps run after the measured ones, in a separate pass, so the Profiler's overhead never
enters the timed step metrics. The output folder stays beside the run's records (`<run>.profiles/<cell
id>/`); the summary (hardware/op_times.py's shape, parsed from the backend's files by
hardware/mindspore/profiler_files.py) goes into the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hardware.mindspore.memory import pool_peak_from_record
from hardware.mindspore.profiler_files import op_summary

PROFILE_STEPS = 3          # steps under the Profiler; its per-op times are averaged over them


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
