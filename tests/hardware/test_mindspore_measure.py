"""The measurement protocol's statistics and stopping rules (pure Python: a fake step, a fake clock)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.mindspore.config import MeasureConfig
from hardware.mindspore.measure import (median_ci95, measure_steps, process_stats, process_stop_reason, step_stats,
                                        stop_reason)
from msbench.errors import ConfigError


class Loss:
    def __init__(self, value: float) -> None:
        self.value = value

    def asnumpy(self):
        return np.float32(self.value)


class FakeClock:
    """A clock the fake step advances by the next scripted duration."""

    def __init__(self, durations):
        self.t, self.durations = 0.0, list(durations)

    def __call__(self):
        return self.t

    def step(self, *batch):
        self.t += self.durations.pop(0) if self.durations else 1.0
        return Loss(len(self.durations))


def test_step_stats_match_numpy():
    xs = [0.10, 0.11, 0.12, 0.10, 0.30, 0.11, 0.10, 0.12]
    s = step_stats(xs)
    assert s.median == pytest.approx(np.median(xs))
    assert s.iqr == pytest.approx(np.percentile(xs, 75) - np.percentile(xs, 25))
    assert s.cv == pytest.approx(np.std(xs, ddof=1) / np.mean(xs))
    assert s.samples == xs


def test_median_ci_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    small = list(1.0 + 0.05 * rng.standard_normal(10))
    large = list(1.0 + 0.05 * rng.standard_normal(400))
    lo, hi = median_ci95(small)
    assert (lo, hi) == (min(small), max(small))        # too few samples: the whole range
    assert step_stats(large).ci95_rel < step_stats(small).ci95_rel
    lo, hi = median_ci95(large)
    assert lo < np.median(large) < hi and hi - lo < 0.03


def test_stop_rules():
    cfg = MeasureConfig(min_steps=5, max_steps=8, ci_target=0.02, time_budget_s=10)
    assert stop_reason([1.0] * 4, 0.0, cfg) is None                        # below min_steps
    assert stop_reason([1.0] * 5, 0.0, cfg) is None                        # 5 samples: no 95% interval yet
    assert "ci95_rel" in stop_reason([1.0] * 6, 0.0, cfg)                  # constant: converged
    noisy = [1.0, 2.0, 1.5, 3.0, 1.0, 2.5]
    assert stop_reason(noisy, 1.0, cfg) is None
    assert "time budget" in stop_reason(noisy, 10.0, cfg)
    assert "max_steps" in stop_reason(noisy + [2.0, 1.0], 1.0, cfg)


def test_protocol_separates_compile_and_warmup():
    cfg = MeasureConfig(warmup_steps=2, min_steps=5, max_steps=50, ci_target=0.02, time_budget_s=100)
    clock = FakeClock([5.0, 0.9, 0.8] + [0.5] * 10)
    m = measure_steps(lambda: (), clock.step, cfg, clock=clock)
    assert m.first_step_s == 5.0 and m.warmup == pytest.approx([0.9, 0.8])
    assert m.stats.samples == pytest.approx([0.5] * 6) and "ci95_rel" in m.stop_reason
    assert m.compile_s == pytest.approx(4.5)
    assert len(m.losses) == 1 + 2 + 6


def test_protocol_keeps_measuring_noisy_steps_until_budget():
    cfg = MeasureConfig(warmup_steps=0, min_steps=5, max_steps=1000, ci_target=0.001, time_budget_s=20)
    rng = np.random.default_rng(1)
    clock = FakeClock([1.0] + list(0.5 + 0.3 * rng.random(200)))
    m = measure_steps(lambda: (), clock.step, cfg, clock=clock)
    assert "time budget" in m.stop_reason
    assert sum(m.stats.samples) >= 20 and sum(m.stats.samples[:-1]) < 20


def test_step_time_includes_the_wait_for_data():
    cfg = MeasureConfig(warmup_steps=0, min_steps=5, max_steps=5, ci_target=0.5, time_budget_s=10)
    clock = FakeClock([1.0] * 6)

    def fetch():
        clock.t += 0.25
        return ()
    m = measure_steps(fetch, clock.step, cfg, clock=clock)
    assert m.stats.median == pytest.approx(1.25) and m.data_s == pytest.approx(0.25)


@pytest.mark.slow
def test_process_stats_are_over_process_medians():
    a = step_stats([1.0, 1.01, 0.99, 1.0, 1.02, 1.0])
    b = step_stats([1.2, 1.21, 1.19, 1.2, 1.2, 1.22])
    c = step_stats([1.1, 1.1, 1.11, 1.09, 1.1, 1.1])
    s = process_stats([a, b, c])
    assert s.process_medians == [a.median, b.median, c.median]
    assert s.median == pytest.approx(1.1)
    # three medians 1.0, 1.2, 1.1: t(0.975, 2) * 0.1 / sqrt(3) / 1.1
    assert s.ci95_rel == pytest.approx(4.302653 * 0.1 / np.sqrt(3) / 1.1, rel=1e-5)
    assert s.ci95_rel > max(a.ci95_rel, b.ci95_rel, c.ci95_rel)   # wider than any in-process interval
    assert len(s.samples) == 18 and s.process_cv == pytest.approx(0.1 / 1.1)
    one = process_stats([a])
    assert one.median == a.median and one.process_medians == [a.median] and one.process_cv is None


def test_process_stop_rule():
    cfg = MeasureConfig(processes=3, max_processes=5, process_ci_target=0.03)
    assert process_stop_reason([1.0, 1.0], cfg) is None                      # below `processes`
    assert "process ci95_rel" in process_stop_reason([1.0, 1.001, 0.999], cfg)
    assert process_stop_reason([1.0, 1.2, 1.1], cfg) is None                 # too wide: one more
    assert "max_processes=5" in process_stop_reason([1.0, 1.2, 1.1, 0.9, 1.3], cfg)
    with pytest.raises(ConfigError, match="processes"):
        MeasureConfig(processes=4, max_processes=3)
