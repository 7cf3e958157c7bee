"""The measurement protocol's statistics and stopping rules (pure Python: a fake step, a fake clock)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.mindspore.config import MeasureConfig
from hardware.mindspore.measure import median_ci95, measure_steps, step_stats, stop_reason


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
