"""The one Student-t interval the suite uses: over independent repeats (processes, seeds), never steps."""

from __future__ import annotations

import math
from typing import Sequence


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width) of the two-sided Student-t interval of the mean; half-width inf below 2 values."""
    from scipy import stats

    n = len(values)
    if n == 0:
        raise ValueError("mean_interval needs at least one value")
    mean = sum(values) / n
    if n < 2:
        return mean, math.inf
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    return mean, float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)


def paired_delta_pp(values: Sequence[float], baseline: Sequence[float]) -> tuple[float, list[float] | None]:
    """Mean accuracy difference in percentage points over seed-paired runs (value i and baseline i
    trained with the same seed), and its 95% interval [lo, hi] (None with fewer than two pairs)."""
    diffs = [(a - b) * 100.0 for a, b in zip(values, baseline)]
    if not diffs:
        raise ValueError("paired_delta_pp needs at least one pair")
    mean, half = mean_interval(diffs)
    return mean, (None if math.isinf(half) else [mean - half, mean + half])


def is_effect(interval: Sequence[float] | None) -> bool | None:
    """Whether an interval excludes 0 (None: no interval, cannot tell)."""
    if interval is None:
        return None
    lo, hi = interval
    return lo > 0 or hi < 0
