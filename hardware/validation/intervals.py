"""95% intervals for the CPU validation's two headline statistics, so that a short run's figures say how
far they can be trusted: a dozen cells pin a median |error| much less tightly than forty.

- median |error|: the exact distribution-free interval of a median from order statistics (the number of
  values below the true median is binomial(n, 1/2); scipy's `quantile_test`), no seed and no resampling;
- Spearman's rank correlation: the percentile bootstrap over cells (cells resampled with replacement,
  measured and predicted kept paired), seeded, so the same rows give the same interval on any machine.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101          # fixed: the interval is part of the report, which must be reproducible
MIN_CELLS = 3                      # as for the statistics themselves: fewer cells, no interval


def median_interval(values: Sequence[float]) -> list[float] | None:
    """[lower, upper] exact 95% interval of the median of `values` (None below MIN_CELLS). Below 6 values no
    pair of order statistics reaches 95%, so the interval is the full range (its coverage is stated by n)."""
    if len(values) < MIN_CELLS:
        return None
    from scipy.stats import quantile_test

    xs = np.sort(np.asarray(values, dtype=float))
    ci = quantile_test(xs, q=float(np.median(xs)), p=0.5).confidence_interval(LEVEL)
    lo = xs[0] if not math.isfinite(ci.low) else ci.low
    hi = xs[-1] if not math.isfinite(ci.high) else ci.high
    return [float(lo), float(hi)]


def spearman_interval(xs: Sequence[float], ys: Sequence[float]) -> list[float] | None:
    """[lower, upper] percentile-bootstrap 95% interval of Spearman's rho over paired (x, y); resamples in
    which one side is constant (rho undefined) are left out. None below MIN_CELLS or for a constant side."""
    if len(xs) < MIN_CELLS or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import rankdata

    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(x), size=(BOOTSTRAP_RESAMPLES, len(x)))
    rx, ry = rankdata(x[idx], axis=1), rankdata(y[idx], axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    ok = denom > 0
    rho = (rx * ry).sum(axis=1)[ok] / denom[ok]
    lo, hi = np.quantile(rho, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return [float(lo), float(hi)]
