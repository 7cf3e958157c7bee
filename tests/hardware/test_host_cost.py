"""The measured per-sample host cost of a workload's real data pipeline, and its cache."""

from __future__ import annotations

import statistics

import pytest

import hardware.model.host_cost as host_cost_mod
from hardware.model.host_cost import HostCost, ProbePlan, cpu_model, host_cost, host_cost_key
from msbench.settings import Settings


@pytest.mark.slow
def test_measured_positive_and_cached(private_cache, monkeypatch):
    cost = host_cost("resnet50", "tiny", {}, Settings())
    assert cost.seconds_per_sample > 0 and cost.per_sample_s == cost.seconds_per_sample
    # the figure is the median of the timed segments (not their mean, nor the first one), each a real timing
    assert cost.seconds_per_sample == statistics.median(cost.segments_s_per_sample)
    assert all(s > 0 for s in cost.segments_s_per_sample)
    assert len(cost.segments_s_per_sample) == host_cost_mod.REPEATS
    assert cost.batch_size == 32 and cost.samples_timed >= host_cost_mod.REPEATS * host_cost_mod.MIN_SAMPLES
    assert cost.bytes_per_sample > 0 and cost.host_cores >= 1 and cost.cpu_model

    def no_measure(*_args, **_kwargs):
        raise AssertionError("a cache hit must not measure")

    monkeypatch.setattr(host_cost_mod, "run_child", no_measure)
    assert host_cost("resnet50", "tiny", {}, Settings(workers=2, amp_level="O2")) == cost


def test_key_follows_the_pipeline_inputs():
    base = host_cost_key("resnet50", "tiny", {}, Settings())
    assert host_cost_key("resnet50", "tiny", {}, Settings(amp_level="O3", prefetch=4)) == base
    assert host_cost_key("resnet50", "tiny", {}, Settings(data_format="mindrecord")) != base
    # One per-sample measurement serves every batch size: cells of a workload never mix measurements.
    assert host_cost_key("resnet50", "tiny", {}, Settings(batch_size=8)) == base
    assert host_cost_key("resnet50", "full", {}, Settings()) != base


def test_round_trips_through_json():
    cost = HostCost(seconds_per_sample=0.001, bytes_per_sample=12, host_cores=2, cpu_model=cpu_model(),
                    batch_size=4, segments_s_per_sample=(0.001, 0.002, 0.0009), samples_timed=96, key="k")
    assert HostCost.from_dict(cost.to_dict()) == cost


def test_bad_preset_is_a_config_error(private_cache):
    from msbench.errors import ConfigError

    with pytest.raises(ConfigError, match="preset"):
        host_cost("resnet50", "huge", {}, Settings())


@pytest.mark.parametrize("train_samples, batch", [(1024, 256), (65536, 32), (512, 16), (40, 16), (8, 32)])
def test_probe_times_only_epochs_after_the_first(train_samples, batch):
    """Sources generate each sample on first read: a timed batch in the first epoch would time generation."""
    plan = ProbePlan.for_split(train_samples, batch)
    timed = plan.repeats * plan.per_segment
    assert plan.per_segment * batch >= host_cost_mod.MIN_SAMPLES or plan.per_segment == 1
    assert plan.train_samples <= train_samples
    assert (plan.epochs - 1) * plan.epoch_batches >= timed           # every timed batch after epoch one
    assert plan.train_samples >= min(train_samples, timed * batch)   # cut, but never below what is timed
