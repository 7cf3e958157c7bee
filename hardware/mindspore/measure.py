"""The measurement protocol and its statistics.

First step (graph compile + one step) timed apart; `warmup_steps` more run unmeasured; then steps
are measured until the relative 95% confidence interval of the median is below `ci_target`, or
`time_budget_s` is spent, or `max_steps` are taken (never fewer than `min_steps`). The interval is
the distribution-free one from order statistics (the median's rank is binomial(n, 1/2)), so no
normality is assumed for step times, which are skewed by noisy neighbours.

That in-process interval only says how well one process's median is known: steps of one process
share its compile, memory layout and thread placement, so medians of separate processes differ far
more (24% here where each in-process interval claimed 2%). A cell is therefore measured in several
fresh processes (pyperf's design); `process_stop_reason` decides how many and `process_stats` gives
the cell's median and its interval over the process medians (msbench.repeat runs the processes).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from hardware.mindspore.config import MeasureConfig
from msbench.records import Metrics, StepStats
from msbench.stats import mean_interval

if TYPE_CHECKING:
    from hardware.mindspore.memory import MemoryReport

Z95 = 1.959964
# The full range of n samples covers the median with probability 1 - 2 * 0.5**n: at least 95% from n = 6.
MIN_CI_SAMPLES = 6


def median_ci95(samples: list[float]) -> tuple[float, float]:
    """(lower, upper) 95% CI of the median by order statistics; the full range when n is too small."""
    xs = sorted(samples)
    n = len(xs)
    half = Z95 * math.sqrt(n) / 2
    lo = max(1, math.floor(n / 2 - half))          # 1-based ranks
    hi = min(n, math.ceil(n / 2 + half) + 1)
    return xs[lo - 1], xs[hi - 1]


def step_stats(samples: list[float]) -> StepStats:
    """median, IQR, CV (std/mean) and the relative half-width of the median's 95% CI."""
    if len(samples) < 2:
        raise ValueError(f"step_stats needs >= 2 samples, got {len(samples)}")
    arr = np.asarray(samples, dtype=float)
    median = float(np.median(arr))
    q1, q3 = np.percentile(arr, [25, 75])
    lo, hi = median_ci95(samples)
    return StepStats(median=median, iqr=float(q3 - q1), cv=float(arr.std(ddof=1) / arr.mean()),
                     ci95_rel=float((hi - lo) / 2 / median) if median > 0 else math.inf,
                     samples=[float(x) for x in samples])


@dataclass
class Measurement:
    """Timings of one measured run, in seconds. `compile_s` = first step minus the median step."""

    first_step_s: float
    stats: StepStats
    data_s: float                      # median time waiting for the next batch (part of each step)
    warmup: list[float] = field(default_factory=list)
    stop_reason: str = ""
    losses: list[float] = field(default_factory=list)

    @property
    def compile_s(self) -> float:
        return max(0.0, self.first_step_s - self.stats.median)


def stop_reason(samples: list[float], elapsed: float, config: MeasureConfig) -> str | None:
    """Why to stop now (None: keep measuring)."""
    n = len(samples)
    if n < config.min_steps:
        return None
    if n >= MIN_CI_SAMPLES and step_stats(samples).ci95_rel < config.ci_target:
        return f"ci95_rel < {config.ci_target:g} after {n} steps"
    if n >= config.max_steps:
        return f"max_steps={config.max_steps} reached"
    if elapsed >= config.time_budget_s:
        return f"time budget {config.time_budget_s:g} s spent after {n} steps"
    return None


def measure_steps(fetch: Callable[[], tuple], step: Callable[..., object], config: MeasureConfig,
                  clock: Callable[[], float] = time.perf_counter,
                  stop: Callable[[list[float], float, MeasureConfig], str | None] = stop_reason) -> Measurement:
    """Run the protocol. `fetch()` returns the next batch; `step(*batch)` returns a loss that must be
    synchronised (`float(...)` of it blocks until the device is done). A step's time includes its fetch,
    because the data knobs (workers, prefetch, cache) are part of what is measured."""

    def one() -> tuple[float, float, float]:
        t0 = clock()
        batch = fetch()
        t1 = clock()
        loss = float(step(*batch).asnumpy())
        t2 = clock()
        return t2 - t0, t1 - t0, loss

    first, _, loss = one()
    losses = [loss]
    warmup = []
    for _ in range(config.warmup_steps):
        seconds, _, loss = one()
        warmup.append(seconds)
        losses.append(loss)
    samples: list[float] = []
    waits: list[float] = []
    start = clock()
    while True:
        seconds, wait, loss = one()
        samples.append(seconds)
        waits.append(wait)
        losses.append(loss)
        reason = stop(samples, clock() - start, config)
        if reason:
            break
    return Measurement(first_step_s=first, stats=step_stats(samples), data_s=float(np.median(waits)),
                       warmup=warmup, stop_reason=reason, losses=losses)


def t_interval_rel(values: list[float], center: float) -> float:
    """Relative half-width of the Student-t 95% interval of the mean of `values` (independent runs)."""
    if len(values) < 2 or center <= 0:
        return math.inf
    return mean_interval(values)[1] / center


def process_stats(per_process: list[StepStats]) -> StepStats:
    """One cell's stats from its processes' (per-step) stats: the median of the process medians with
    their t-interval; IQR, CV and samples over all steps. One process keeps its own step-level stats."""
    medians = [s.median for s in per_process]
    if len(per_process) == 1:
        return replace(per_process[0], process_medians=medians)
    pooled = step_stats([x for s in per_process for x in s.samples])
    center = float(np.median(medians))
    return replace(pooled, median=center, ci95_rel=t_interval_rel(medians, center), process_medians=medians)


def process_stop_reason(medians: list[float], config: MeasureConfig) -> str | None:
    """Why to launch no more processes for a cell (None: launch another). At least `processes`, then
    until the process medians' interval is below `process_ci_target`, at most `max_processes`."""
    n = len(medians)
    if n < config.processes:
        return None
    if n >= 2 and t_interval_rel(medians, float(np.median(medians))) < config.process_ci_target:
        return f"process ci95_rel < {config.process_ci_target:g} after {n} processes"
    if n >= config.max_processes:
        return f"max_processes={config.max_processes} reached"
    return None


def make_metrics(*, stats: StepStats, data_s: float, compile_s: float, global_samples: int, step_batch: int,
                 memory: "MemoryReport", extra: dict[str, Any]) -> Metrics:
    """Record metrics of a measured session: throughput = global samples per step / median step time."""
    return Metrics(
        step_time_s=stats.median, step_time_stats=stats,
        throughput=global_samples / stats.median, throughput_per_device=step_batch / stats.median,
        peak_memory_bytes=memory.headline_bytes, peak_memory_source=memory.source, peak_memory_detail=memory.detail,
        compile_time_s=compile_s, breakdown={"data_wait": data_s, "compute": max(0.0, stats.median - data_s)},
        extra={**extra, "global_samples_per_step": global_samples},
    )


def per_step(stats: StepStats, steps_per_call: int) -> StepStats:
    """Stats of calls that each ran `steps_per_call` optimizer steps (dataset sink), per step."""
    if steps_per_call == 1:
        return stats
    k = float(steps_per_call)
    return replace(stats, median=stats.median / k, iqr=stats.iqr / k, samples=[s / k for s in stats.samples])
