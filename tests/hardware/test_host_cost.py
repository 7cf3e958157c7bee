"""The host cost as calibration data: the file the model reads, the scaling law, and the measuring command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hardware.calibration import host_cost as calibration
from hardware.calibration.host_cost import EntrySpec, ProbePlan, calibrate_host, default_specs
from hardware.model.host_cost import CALIBRATION_FILE, SCHEMA, calibration_hash, entry_key, host_cost
from hardware.model.host_time import per_sample_seconds, serial_per_sample_s
from msbench.errors import UserError
from workloads.registry import WORKLOADS, get_workload

REPO = Path(__file__).resolve().parents[2]
TIMING_CALLS = re.compile(r"\b(perf_counter|process_time|monotonic|time\.time|getloadavg|clock_gettime)\b")


def test_the_shipped_file_covers_every_workload_and_matrix_cell():
    """`predict`, `run` and `nightly` never probe: every shipped workload's presets and the validation
    matrix's resized cells are in the file, with the fields the model and a reader need."""
    data = json.loads(CALIBRATION_FILE.read_text())
    assert data["schema"] == SCHEMA and data["note"].startswith(calibration.NOTE)
    for workload in WORKLOADS:
        for preset in ("tiny", "full"):
            for fmt in ("generator", "mindrecord"):
                assert entry_key(workload, preset, {}, fmt) in data["entries"]
    for key, e in data["entries"].items():
        assert key == entry_key(e["workload"], e["preset"], e["overrides"], e["data_format"])
        assert set(e["seconds_per_sample"]) == {"1", "2"} and min(e["seconds_per_sample"].values()) > 0
        assert 0 <= e["python_seconds_per_sample"] and e["bytes_per_sample"] > 0
        for workers, (low, high) in e["spread"].items():
            assert low <= e["seconds_per_sample"][workers] <= high
        assert e["host"]["cores"] >= 1 and e["host"]["cpu_model"] and e["measured_at"].endswith("Z")
        assert e["command"].startswith(f"msbench calibrate host {e['workload']} --preset {e['preset']}")


def test_model_reads_the_entry_and_the_file_hash(tmp_path):
    path = tmp_path / "host_cost.json"
    entry = {"workload": "resnet50", "preset": "tiny", "overrides": {"image_size": 64}, "data_format": "generator",
             "seconds_per_sample": {"1": 2e-4, "2": 1.2e-4}, "python_seconds_per_sample": 1e-5,
             "bytes_per_sample": 100}
    path.write_text(json.dumps({"schema": SCHEMA, "note": "test", "entries": {
        entry_key("resnet50", "tiny", {"image_size": 64}, "generator"): entry}}))
    cost = host_cost("resnet50", "tiny", {"image_size": 64}, "generator", path=path)
    assert (cost.per_sample_s, cost.per_sample_2_workers_s, cost.python_per_sample_s) == (2e-4, 1.2e-4, 1e-5)
    assert cost.bytes_per_sample == 100 and cost.calibration_hash == calibration_hash(path)
    assert len(cost.calibration_hash) == 64


def test_a_missing_entry_names_the_calibrate_command():
    with pytest.raises(UserError, match=r"msbench calibrate host resnet50 --preset tiny --data-format generator "
                                        r"--override image_size=99"):
        host_cost("resnet50", "tiny", {"image_size": 99}, "generator")


class Entry:
    def __init__(self, one: float, two: float, python: float) -> None:
        self.per_sample_s, self.per_sample_2_workers_s, self.python_per_sample_s = one, two, python


@pytest.mark.parametrize("one, two, python", [(1.0, 0.5, 0.0), (1.0, 0.6, 0.1), (1.0, 0.9, 0.05), (1.0, 0.6, 0.5),
                                              (1.0, 1.1, 0.2)])
def test_scaling_law_meets_both_measurements_and_never_speeds_up_past_the_serial_part(one, two, python):
    e = Entry(one, two, python)
    assert per_sample_seconds(1, e) == one and per_sample_seconds(2, e) == pytest.approx(two)
    serial = serial_per_sample_s(e)
    assert serial == pytest.approx(min(two, max(2 * two - one, 0.0)))   # what the two points imply, in [0, t2]
    times = [per_sample_seconds(w, e) for w in range(2, 65)]
    assert all(a >= b for a, b in zip(times, times[1:]))    # more workers never cost more
    assert times[-1] >= serial                              # Amdahl's floor
    assert per_sample_seconds(8, e) == pytest.approx(serial + (two - serial) / 4)


def test_no_timing_call_in_the_device_model():
    """The model is a pure function of its inputs and files: only hardware/calibration/ measures the host."""
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "hardware" / "model").rglob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1) if TIMING_CALLS.search(line)]
    assert offenders == []


def test_default_specs_remeasure_the_file_or_name_the_grid():
    existing = {"a": {"workload": "bert-base", "preset": "tiny", "overrides": {"seq_len": 64},
                      "data_format": "generator"}}
    assert default_specs([], [], [], {}, existing) == [EntrySpec("bert-base", "tiny", (("seq_len", 64),), "generator")]
    grid = default_specs(["resnet50"], ["tiny"], [], {}, existing)
    assert [s.key for s in grid] == ["resnet50/tiny/generator", "resnet50/tiny/mindrecord"]
    from msbench.errors import ConfigError

    with pytest.raises(ConfigError, match="resnet5"):
        default_specs(["resnet5"], [], [], {}, {})
    with pytest.raises(UserError, match="--override"):
        default_specs([], [], [], {"image_size": 64}, existing)


@pytest.mark.parametrize("train_samples, batch", [(1024, 256), (65536, 32), (512, 16), (40, 16), (8, 32)])
def test_probe_times_only_epochs_after_the_first(train_samples, batch):
    """Sources generate each sample on first read: a timed batch in the first epoch would time generation."""
    plan = ProbePlan.for_split(train_samples, batch)
    timed = plan.repeats * plan.per_segment
    assert plan.per_segment * batch >= calibration.MIN_SAMPLES or plan.per_segment == 1
    assert plan.train_samples <= train_samples
    assert (plan.epochs - 1) * plan.epoch_batches >= timed           # every timed batch after epoch one
    assert plan.train_samples >= min(train_samples, timed * batch)   # cut, but never below what is timed


@pytest.mark.slow
def test_calibrate_measures_an_entry_the_model_then_reads(tmp_path, private_cache):
    path = tmp_path / "host_cost.json"
    spec = EntrySpec("bert-base", "tiny", (), "generator")
    calibrate_host([spec], path)
    data = json.loads(path.read_text())
    e = data["entries"][spec.key]
    assert len(e["segments"]["1"]) == len(e["segments"]["2"]) == calibration.REPEATS
    # BERT's masking is a Python map: its share of the 1-worker time is measured and is not zero.
    assert 0 < e["python_seconds_per_sample"] <= e["seconds_per_sample"]["1"]
    assert e["batch_size"] == get_workload("bert-base").preset("tiny").batch_size
    assert e["samples_timed_per_worker_count"] >= calibration.MIN_SAMPLES
    assert len(e["host"]["load_average_before"]) == 3
    cost = host_cost("bert-base", "tiny", {}, "generator", path=path)
    assert cost.per_sample_s == e["seconds_per_sample"]["1"] and cost.bytes_per_sample == e["bytes_per_sample"]


@pytest.mark.parametrize("field, value", [("bytes_per_sample", -5), ("seconds_per_sample", {"1": float("nan"), "2": 1e-3}),
                                          ("seconds_per_sample", {"1": 1e-3, "2": 0}), ("python_seconds_per_sample", -1e-4)])
def test_a_corrupt_calibration_entry_is_refused_not_predicted(tmp_path, field, value):
    """A hand-edited or damaged file must not move predictions silently: one line naming the entry and field."""
    data = json.loads(CALIBRATION_FILE.read_text())
    key = entry_key("resnet50", "tiny", {}, "generator")
    data["entries"][key][field] = value
    bad = tmp_path / "host_cost.json"
    bad.write_text(json.dumps(data, allow_nan=True))
    with pytest.raises(UserError, match=rf"{re.escape(key)}: {field}.* is not allowed; allowed: a finite number"):
        host_cost("resnet50", "tiny", {}, "generator", path=bad)
