"""Accuracy with confidence: seed-paired deltas, their interval, and the report and claims reading it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import record  # noqa: E402

from msbench.errors import ConfigError  # noqa: E402
from msbench.matrix_file import load_matrix  # noqa: E402
from msbench.report.claims import amp_measure  # noqa: E402
from msbench.report.effects import knob_effects  # noqa: E402
from msbench.report.load import RecordSet  # noqa: E402
from msbench.runner import with_accuracy_delta  # noqa: E402
from msbench.stats import is_effect, mean_interval, paired_delta_pp  # noqa: E402


def seeded(values, **knobs):
    r = record(thr=100.0, peak_gib=1.0, acc=sum(values) / len(values), **knobs)
    r.metrics.extra["accuracy_run"] = {"values": list(values), "seeds": [1, 2, 3], "lr_rule": "preset lr 0.1"}
    return r


def test_mean_interval_is_students_t():
    mean, half = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 * 1.0 / 3 ** 0.5, rel=1e-6)
    assert mean_interval([5.0])[1] == float("inf")


def test_paired_delta_uses_seed_pairs_not_pooled_spread():
    base = [0.50, 0.60, 0.70]                      # seeds differ by 10 pp ...
    shifted = [0.52, 0.62, 0.72]                   # ... but each seed gains exactly 2 pp
    delta, interval = paired_delta_pp(shifted, base)
    assert delta == pytest.approx(2.0) and interval == pytest.approx([2.0, 2.0]) and is_effect(interval)
    noisy = [0.53, 0.58, 0.71]
    delta, interval = paired_delta_pp(noisy, base)
    assert interval[0] < 0 < interval[1] and is_effect(interval) is False
    assert paired_delta_pp([0.6], [0.5])[1] is None and is_effect(None) is None


def test_runner_delta_is_seed_paired_with_an_interval():
    base = seeded([0.50, 0.60, 0.70])
    cell = with_accuracy_delta(seeded([0.40, 0.49, 0.61], amp_level="O2"), base)
    assert cell.metrics.accuracy_delta_pp == pytest.approx(-10.0)
    lo, hi = cell.metrics.accuracy_delta_ci95_pp
    assert lo < -10.0 < hi < 0
    single = record(acc=0.4, amp_level="O2")
    with_accuracy_delta(single, record(acc=0.5))
    assert single.metrics.accuracy_delta_pp == pytest.approx(-10.0) and single.metrics.accuracy_delta_ci95_pp is None


def test_report_calls_an_effect_only_outside_seed_noise():
    base = seeded([0.50, 0.60, 0.70])
    real = with_accuracy_delta(seeded([0.40, 0.50, 0.60], amp_level="O2"), base)
    noise = with_accuracy_delta(seeded([0.55, 0.52, 0.71], amp_level="O3"), base)
    table, _ = knob_effects(RecordSet.of([base, real, noise]).frame)
    rows = table.set_index("label")
    assert rows.loc["amp_level=O2", "accuracy_effect"] == "effect"
    assert rows.loc["amp_level=O3", "accuracy_effect"] == "within seed noise"
    assert rows.loc["amp_level=O2", "lr_rule"] == "preset lr 0.1"


def test_amp_verdict_counts_no_loss_within_seed_noise():
    def loss(alt_values):
        frame = RecordSet.of([seeded([0.50, 0.60, 0.70]), seeded(alt_values, amp_level="O2")]).frame.set_index("label")
        return amp_measure(frame.loc["base"], frame.loc["amp_level=O2"])["accuracy_loss_pp"]

    assert loss([0.45, 0.62, 0.66]) == 0.0                                  # mean 2.3 pp, interval holds 0
    assert loss([0.45, 0.55, 0.66]) == pytest.approx(4.6667, rel=1e-3)     # 5, 5, 4 pp: a loss


def test_matrix_accuracy_seeds_key(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('name = "m"\naccuracy = true\naccuracy_seeds = 5\n[[workloads]]\nname = "resnet50"\n')
    assert load_matrix(path).accuracy_seeds == 5
    path.write_text('name = "m"\n[[workloads]]\nname = "resnet50"\n')
    assert load_matrix(path).accuracy_seeds == 3
    path.write_text('name = "m"\naccuracy_seeds = 0\n[[workloads]]\nname = "resnet50"\n')
    with pytest.raises(ConfigError, match="accuracy_seeds"):
        load_matrix(path)


def test_matrix_accuracy_knobs_limit_which_numerics_get_runs(tmp_path):
    from hardware.mindspore.accuracy import not_run_reason
    from hardware.mindspore.target import add_accuracy
    from msbench.settings import make_settings

    path = tmp_path / "m.toml"
    path.write_text('accuracy = true\naccuracy_knobs = ["amp_level", "loss_scale"]\n[[workloads]]\nname = "resnet50"\n')
    knobs = load_matrix(path).accuracy_knobs
    assert knobs == ("amp_level", "loss_scale")
    for bad in ('accuracy = true\naccuracy_knobs = ["mode"]', 'accuracy = true\naccuracy_knobs = ["seed"]',
                'accuracy_knobs = ["amp_level"]'):
        path.write_text(bad + '\n[[workloads]]\nname = "resnet50"\n')
        with pytest.raises(ConfigError, match="accuracy_knobs"):
            load_matrix(path)
    # listed numerics and speed-only knobs run; other numerics (data parallelism is accumulation) do not
    assert not_run_reason(make_settings({"amp_level": "O2", "loss_scale": "dynamic"}), knobs) is None
    assert not_run_reason(make_settings({"mode": "pynative", "workers": 1}), knobs) is None
    assert "grad_accum=4" in not_run_reason(make_settings({"grad_accum": 4}), knobs)
    assert "grad_accum=8" in not_run_reason(make_settings({"devices": 8}), knobs)
    assert not_run_reason(make_settings({"grad_accum": 4}), None) is None
    skipped = record(thr=100.0, grad_accum=4)
    add_accuracy(skipped, 3, knobs)          # refused before any child process is started
    assert skipped.metrics.accuracy is None and "accuracy not run" in skipped.metrics.extra["accuracy_run"]["reason"]
