"""Peak memory of a training step, by the best counter each device has.

Ascend/GPU: `ms.runtime.max_memory_allocated()` after `reset_max_memory_allocated()`. On the CPU
those counters read 0 (reference §4), so two measures are kept: the profiler's memory record (the
CPU pool's peak allocated bytes: activations and workspace, without the persistent weights) plus the
parameter bytes (weights and optimizer state) as the headline, and the process RSS peak above the
pre-build baseline as a cross-check that includes the allocator's slack and MindSpore's runtime.
"""

from __future__ import annotations

import csv
import glob
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil


class PeakRSS:
    """Peak RSS of this process inside a `with` block (a background sampler; ru_maxrss is lifetime-only)."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.baseline = self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process()

    def __enter__(self) -> "PeakRSS":
        self.baseline = self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self.interval_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


@dataclass
class MemoryReport:
    headline_bytes: int | None
    source: str | None                # names the headline: device_max_allocated | pool+params | rss
    detail: dict[str, int] = field(default_factory=dict)


def parameter_bytes(cell: object) -> int:
    """Bytes of every Parameter of the step cell (weights, optimizer moments, loss scale), once each."""
    seen: dict[int, int] = {}
    for p in cell.get_parameters():  # type: ignore[attr-defined]
        seen[id(p)] = p.nbytes
    return sum(seen.values())


def profiled_pool_peak(run_step: Callable[[], None], steps: int, out_dir: Path) -> int | None:
    """Run `steps` steps under the MindSpore profiler with memory recording; the CPU pool's peak
    allocated bytes (None when the record is missing)."""
    from mindspore.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 schedule=schedule(wait=0, warmup=0, active=steps, repeat=1, skip_first=0),
                 on_trace_ready=tensorboard_trace_handler(str(out_dir))) as prof:
        for _ in range(steps):
            run_step()
            prof.step()
    return pool_peak_from_record(out_dir)


def pool_peak_from_record(out_dir: Path) -> int | None:
    files = glob.glob(str(out_dir / "**" / "cpu_ms_memory_record_*.txt"), recursive=True)
    if not files:
        return None
    with open(max(files, key=lambda f: Path(f).stat().st_mtime)) as fh:
        values = [int(row["Total Allocated(Byte)"]) for row in csv.DictReader(fh)]
    return max(values) if values else None


def device_counters_reset() -> None:
    import mindspore as ms

    ms.runtime.reset_max_memory_allocated()


def device_max_allocated() -> int:
    import mindspore as ms

    return int(ms.runtime.max_memory_allocated())


def report(*, rss: PeakRSS, params: int, pool_peak: int | None, device_peak: int | None) -> MemoryReport:
    """Pick the headline: the device counter where it exists, else pool + params, else the RSS delta."""
    detail = {"rss_peak": rss.peak, "rss_baseline": rss.baseline, "rss_delta": rss.peak - rss.baseline,
              "params": params}
    if device_peak:
        detail["device_max_allocated"] = device_peak
        return MemoryReport(device_peak, "device_max_allocated", detail)
    if pool_peak is not None:
        detail["pool_peak"] = pool_peak
        return MemoryReport(pool_peak + params, "pool+params", detail)
    return MemoryReport(rss.peak - rss.baseline, "rss", detail)
