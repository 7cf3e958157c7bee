"""The host cost as calibration data: the file the model reads, the scaling law, and the measuring command."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import re
from pathlib import Path

import pytest

from hardware.calibration import host_cost as calibration
from hardware.calibration import host_probe
from hardware.calibration.host_cost import EntrySpec, calibrate_host, default_specs, held_out_points
from hardware.calibration.host_probe import ProbePlan, gil_replay, stage_table
from hardware.model.host_cost import CALIBRATION_FILE, SCHEMA, PipelineStage, calibration_hash, entry_key, host_cost
from hardware.model.host_time import data_seconds, per_sample_seconds, pipeline_bound
from hardware.model.profile import load_profile
from msbench.errors import UserError
from msbench.settings import Settings
from workloads.registry import WORKLOADS, calibration_entry, get_workload

REPO = Path(__file__).resolve().parents[2]
TIMING_CALLS = re.compile(r"\b(perf_counter|process_time|monotonic|time\.time|getloadavg|clock_gettime)\b")


def test_the_shipped_file_covers_every_workload_and_matrix_cell():
    """`predict`, `run` and `nightly` never probe: every shipped workload's presets and the validation
    matrix's resized cells are in the file, with the fields the model and a reader need."""
    data = json.loads(CALIBRATION_FILE.read_text())
    assert data["schema"] == SCHEMA and data["note"].startswith(calibration.NOTE)
    from workloads.transformer.config import is_llm_preset

    for workload in WORKLOADS:
        for preset in ("tiny", "full"):
            if is_llm_preset(get_workload(workload).preset(preset, {})):
                continue              # composed from blocks, which read no host cost (the refusals say so)
            for fmt in ("generator", "mindrecord"):
                assert entry_key(*calibration_entry(workload, preset, {}), fmt) in data["entries"]
    for key, e in data["entries"].items():
        assert key == entry_key(e["workload"], e["preset"], e["overrides"], e["data_format"])
        # no entry the model never reads: a second measurement of one pipeline could only disagree
        assert key == entry_key(*calibration_entry(e["workload"], e["preset"], e["overrides"]), e["data_format"])
        assert e["stages"] and max(s["cpu_seconds_per_sample"] for s in e["stages"]) > 0
        for s in e["stages"]:
            assert 0 <= s["python_seconds_per_sample"] <= s["cpu_seconds_per_sample"]
            assert s["spread"][0] <= s["cpu_seconds_per_sample"] <= s["spread"][1]
        assert 0 <= e["gil_fraction"] <= 1 and e["consumer_seconds_per_sample"] >= 0 and e["bytes_per_sample"] > 0
        assert {(h["workers"], h["cores"]) for h in e["held_out"].values()} == {(1, 1), (2, 2)}
        for h in e["held_out"].values():
            assert h["spread"][0] <= h["seconds_per_sample"] <= h["spread"][1]
        assert e["host"]["cores"] >= 1 and e["host"]["cpu_model"] and e["measured_at"].endswith("Z")
        assert len(e["host"]["load_average_before"]) == len(e["host"]["load_average_after"]) == 3
        assert e["command"].startswith(f"msbench calibrate host {e['workload']} --preset {e['preset']}")
        if "runs" in e:        # measured by --runs N: the kept run is the median one by its bottleneck
            runs = sorted(r["bottleneck_cpu_seconds_per_sample"] for r in e["runs"])
            assert calibration.bottleneck_seconds(e) == runs[(len(runs) - 1) // 2]
            assert e["command"].endswith(f" --runs {len(runs)}")


def entry(**fields):
    base = {"workload": "resnet50", "preset": "tiny", "overrides": {"image_size": 64}, "data_format": "generator",
            "stages": [{"name": "source", "cpu_seconds_per_sample": 1e-4, "python_seconds_per_sample": 8e-5},
                       {"name": "thread 1", "cpu_seconds_per_sample": 3e-4, "python_seconds_per_sample": 0.0}],
            "consumer_seconds_per_sample": 5e-5, "gil_fraction": 0.5, "bytes_per_sample": 100,
            "held_out": {"1": {"workers": 1, "cores": 1, "seconds_per_sample": 5e-4, "runqueue_wait_seconds_per_sample": 0},
                         "2": {"workers": 2, "cores": 2, "seconds_per_sample": 2e-4, "runqueue_wait_seconds_per_sample": 0}}}
    return {**base, **fields}


def write(path, *entries, schema=SCHEMA):
    path.write_text(json.dumps({"schema": schema, "note": "test", "entries": {
        entry_key(e["workload"], e["preset"], e["overrides"], e["data_format"]): e for e in entries}}))
    return path


def test_model_reads_the_entry_and_the_file_hash(tmp_path):
    path = write(tmp_path / "host_cost.json", entry())
    cost = host_cost("resnet50", "tiny", {"image_size": 64}, "generator", path=path)
    assert cost.stages == (PipelineStage("source", 1e-4, 8e-5), PipelineStage("thread 1", 3e-4, 0.0))
    assert (cost.consumer_s, cost.gil_fraction, cost.bytes_per_sample) == (5e-5, 0.5, 100)
    assert cost.calibration_hash == calibration_hash(path) and len(cost.calibration_hash) == 64


def test_a_missing_entry_names_the_calibrate_command():
    with pytest.raises(UserError, match=r"msbench calibrate host resnet50 --preset tiny --data-format generator "
                                        r"--override image_size=99"):
        host_cost("resnet50", "tiny", {"image_size": 99}, "generator")


def test_an_old_schema_file_is_refused_with_the_command_that_rewrites_it(tmp_path):
    old = {"workload": "resnet50", "preset": "tiny", "overrides": {}, "data_format": "generator",
           "seconds_per_sample": {"1": 2e-4, "2": 1.2e-4}, "python_seconds_per_sample": 0.0, "bytes_per_sample": 9}
    path = write(tmp_path / "host_cost.json", old, entry(), schema=1)
    with pytest.raises(UserError, match=r"schema=1 is not allowed; allowed: 2 .*msbench calibrate host --all"):
        host_cost("resnet50", "tiny", {}, "generator", path=path)
    # a partial re-measure would leave schema-1 entries in a schema-2 file: refused before measuring anything
    with pytest.raises(UserError, match=r"partial re-measure .*--all"):
        calibrate_host([EntrySpec("resnet50", "tiny", (), "generator")], path)


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
    # the three YOLO networks feed one pipeline: naming them measures its one entry per format, once
    yolo = default_specs(["yolov5s", "yolov8n", "yolov8s"], ["full"], ["generator"], {}, existing)
    assert [s.key for s in yolo] == ["yolov8n/full/generator"]
    if importlib.util.find_spec("mindcv") is not None:
        # a zoo network with a recipe's augmentations: mindcv's pipeline, one entry for every network
        pit = default_specs(["mindcv:pit_ti"], ["full"], ["mindrecord"], {"re_prob": 0.25}, existing)
        assert [s.key for s in pit] == ["mindcv:resnet50/full/mindrecord/re_prob=0.25"]
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
    assert plan.per_segment * batch >= host_probe.MIN_SAMPLES or plan.per_segment == 1
    assert plan.train_samples <= train_samples
    assert (plan.epochs - 1) * plan.epoch_batches >= timed           # every timed batch after epoch one
    assert plan.train_samples >= min(train_samples, timed * batch)   # cut, but never below what is timed


class Host:
    """Two stages (reader 1.0, map 3.0 of which 2.0 in Python), a consumer of 0.5, a GIL share of 0.25."""

    def __init__(self, gil: float = 0.25, consumer: float = 0.5) -> None:
        self.stages = (PipelineStage("reader", 1.0, 0.0), PipelineStage("map[0]", 3.0, 2.0))
        self.consumer_s, self.gil_fraction, self.bytes_per_sample, self.calibration_hash = consumer, gil, 1, "h"


@pytest.mark.parametrize("workers, cores, sink, gil, expected, bound", [
    (1, 24, False, 0.25, 3.0, "stage"),        # one worker: the map thread is the bottleneck
    (8, 24, False, 0.25, 0.5, "gil"),          # 3/8 = 0.375 < GIL 0.25*2 = 0.5 = consumer 0.5
    (8, 2, False, 0.25, 2.25, "cores"),        # 8 workers on 2 cores: (1 + 3 + 0.5) / 2
    (64, 24, True, 0.0, 4.0 / 24, "cores"),    # sink drops the consumer; 3/24 < (1 + 3) / 24
    (4, 24, False, 0.0, 0.75, "stage"),        # 3/4 beats the consumer 0.5
    (24, 24, False, 0.0, 0.5, "consumer"),     # without sink the Python iterator is a floor
])
def test_the_pipelined_law_is_its_bottleneck_term(workers, cores, sink, gil, expected, bound):
    terms = pipeline_bound(workers, cores, sink, Host(gil))
    assert terms.seconds == pytest.approx(expected)
    assert getattr(terms, f"{bound}_s") == pytest.approx(expected)
    assert per_sample_seconds(workers, cores, sink, Host(gil)) == terms.seconds


def test_more_workers_never_cost_more_and_never_beat_the_serial_terms():
    host = Host()
    times = [per_sample_seconds(w, 24, False, host) for w in range(1, 65)]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert min(times) == pytest.approx(max(host.gil_fraction * 2.0, host.consumer_s))


def test_data_time_is_per_sample_over_the_profiles_core_speed():
    profile = load_profile("ascend910a")
    settings = Settings(mode="graph", workers=8, sink=True)
    expected = per_sample_seconds(8, profile.host.cores_per_device, True, Host()) * 256 / profile.host.core_speed
    assert data_seconds(256, settings, profile, Host()) == pytest.approx(expected)


def test_stage_table_names_threads_by_their_callable_and_keeps_the_consumer_apart():
    segments = [{10: 2e-3, 11: 1e-3, 12: 1e-6, 99: 5e-4}, {10: 3e-3, 11: 1e-3, 12: 1e-6, 99: 7e-4},
                {10: 2.5e-3, 11: 2e-3, 12: 1e-6, 99: 6e-4}]
    timed = {"threads": segments, "pythons": [{"map[0]": 1e-3}] * 3, "main": 99}
    stages, consumer = stage_table(timed, {10: "map[0]"})
    assert [s["name"] for s in stages] == ["map[0]", "thread 1", "1 minor threads"]
    assert stages[0]["cpu_seconds_per_sample"] == 2.5e-3 and stages[0]["python_seconds_per_sample"] == 1e-3
    assert stages[0]["spread"] == [2e-3, 3e-3] and stages[1]["cpu_seconds_per_sample"] == 1e-3
    assert consumer == [5e-4, 7e-4, 6e-4]


@pytest.mark.slow
def test_gil_replay_tells_gil_held_from_gil_free_work():
    """The same 5 ms libc sleep, once holding the GIL (ctypes.PyDLL keeps it) and once releasing it
    (ctypes.CDLL): two threads of the first serialise, two of the second overlap. A sleep needs no core,
    so the verdict does not depend on the host's load; busy bytecode did (0.11 beside a CI suite on this
    2-core host, where the other thread's GIL wait became run-queue wait, which the replay discounts)."""
    held = gil_replay([(ctypes.PyDLL(None).usleep, (5000,))] * 4)
    free = gil_replay([(ctypes.CDLL(None).usleep, (5000,))] * 4)
    assert held["gil_fraction"] > 0.5 and free["gil_fraction"] < 0.3     # held gave 0.60 beside the CI suite
    assert gil_replay([])["gil_fraction"] == 0.0


def test_each_callable_is_replayed_alone_and_weighted_by_its_python_time():
    """A GIL-holding callable and a GIL-free one in one pipeline: the pipeline's share is each one's share
    weighted by its stage's Python time, not the share of the two replayed together."""
    held, free = (ctypes.PyDLL(None).usleep, (5000,)), (ctypes.CDLL(None).usleep, (5000,))
    stages = [{"name": "map[0]", "python_seconds_per_sample": 3e-3}, {"name": "per_batch", "python_seconds_per_sample": 1e-3},
              {"name": "thread 2", "python_seconds_per_sample": 0.0}]
    out = host_probe.gil_shares(stages, {"map[0]": [held] * 4, "per_batch": [free] * 4})
    g_held, g_free = (out["by_callable"][t]["gil_fraction"] for t in ("map[0]", "per_batch"))
    assert g_held > 0.5 and g_free < 0.3 and out["calls"] == 8
    assert out["gil_fraction"] == pytest.approx(0.75 * g_held + 0.25 * g_free)
    assert host_probe.gil_shares(stages, {})["gil_fraction"] == 0.0


def test_held_out_points_compare_the_wall_clock_with_the_law(tmp_path):
    path = write(tmp_path / "host_cost.json", entry())
    one, two = held_out_points(path)
    # 1 worker on 1 core: all the work (1e-4 + 3e-4 + consumer 5e-5) on one core
    assert (one.workers, one.cores) == (1, 1) and one.law_s == pytest.approx(4.5e-4)
    assert one.error == pytest.approx(4.5e-4 / 5e-4 - 1)
    # 2 workers on 2 cores: the map thread 3e-4 / 2 vs all the work / 2 = 2.25e-4
    assert (two.workers, two.cores) == (2, 2) and two.law_s == pytest.approx(2.25e-4)


@pytest.mark.slow
def test_calibrate_measures_an_entry_the_model_then_reads(tmp_path, private_cache):
    path = tmp_path / "host_cost.json"
    spec = EntrySpec("bert-base", "tiny", (), "generator")
    calibrate_host([spec], path)
    data = json.loads(path.read_text())
    e = data["entries"][spec.key]
    # BERT's generator source and masking map run Python: their threads are named and carry Python time
    names = {s["name"]: s for s in e["stages"]}
    assert {"source", "map[0]"} <= set(names)
    assert 0 < names["source"]["python_seconds_per_sample"] <= names["source"]["cpu_seconds_per_sample"]
    assert e["consumer_seconds_per_sample"] > 0 and 0 <= e["gil_fraction"] <= 1 and e["gil_replay"]["calls"] > 0
    for h in e["held_out"].values():
        assert len(h["segments"]) == host_probe.REPEATS and h["seconds_per_sample"] > 0
    assert e["batch_size"] == get_workload("bert-base").preset("tiny").batch_size
    assert e["samples_timed_per_worker_count"] >= host_probe.MIN_SAMPLES
    assert len(e["host"]["load_average_before"]) == 3
    cost = host_cost("bert-base", "tiny", {}, "generator", path=path)
    assert cost.stages[0].cpu_s == e["stages"][0]["cpu_seconds_per_sample"]
    assert cost.bytes_per_sample == e["bytes_per_sample"]


@pytest.mark.parametrize("fields, name", [
    ({"bytes_per_sample": -5}, "bytes_per_sample"),
    ({"stages": []}, "stages"),
    ({"stages": [{"name": "x", "cpu_seconds_per_sample": float("nan"), "python_seconds_per_sample": 0}]},
     r"stages\[0\].cpu_seconds_per_sample"),
    ({"stages": [{"name": "x", "cpu_seconds_per_sample": 1e-4, "python_seconds_per_sample": 2e-4}]},
     r"stages\[0\].python_seconds_per_sample"),
    ({"stages": [{"name": "x", "cpu_seconds_per_sample": 0, "python_seconds_per_sample": 0}]}, "stages"),
    ({"gil_fraction": 1.5}, "gil_fraction"),
    ({"consumer_seconds_per_sample": -1e-4}, "consumer_seconds_per_sample"),
    ({"consumer_seconds_per_sample": None}, "consumer_seconds_per_sample"),
])
def test_a_corrupt_calibration_entry_is_refused_not_predicted(tmp_path, fields, name):
    """A hand-edited or damaged file must not move predictions silently: one line naming the entry and field."""
    bad = write(tmp_path / "host_cost.json", entry(**fields))
    key = entry_key("resnet50", "tiny", {"image_size": 64}, "generator")
    with pytest.raises(UserError, match=rf"{re.escape(key)}: {name}.* is not allowed; allowed:"):
        host_cost("resnet50", "tiny", {"image_size": 64}, "generator", path=bad)


@pytest.mark.parametrize("text, message", [
    ("truncated", r"not valid JSON \(Unterminated string"),
    ("[]", r"a JSON list is not allowed; allowed: an object with schema and entries"),
    ('{"schema": 2, "entries": []}', r"entries=list is not allowed; allowed: an object of entry objects"),
    ('{"schema": 2, "entries": {"resnet50/tiny/generator": 3}}', r"entries=dict is not allowed"),
])
def test_a_truncated_or_non_object_calibration_file_is_one_line(tmp_path, capsys, text, message):
    """The model and `calibrate host` read it: a damaged file names itself and how to restore it."""
    from msbench.cli import main

    path = write(tmp_path / "host_cost.json", entry())
    path.write_text(path.read_text()[:60] if text == "truncated" else text)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}: {message}.*restore it with `git checkout -- "):
        host_cost("resnet50", "tiny", {"image_size": 64}, "generator", path=path)
    assert main(["calibrate", "host", "resnet50", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"msbench calibrate: error: {path}: ") and "Traceback" not in err


def test_a_stage_that_is_not_an_object_is_refused(tmp_path):
    bad = write(tmp_path / "host_cost.json", entry(stages=[3]))
    with pytest.raises(UserError, match=r"stages\[0\]=3 is not allowed; allowed: an object"):
        host_cost("resnet50", "tiny", {"image_size": 64}, "generator", path=bad)


@pytest.mark.parametrize("argv, message", [(["calibrate", "host"], "no WORKLOAD given; allowed: .*--all"),
                                           (["calibrate", "host", "resnet50", "--all"], "--all is not allowed with")])
def test_calibrate_asks_for_workloads_or_all(argv, message, tmp_path):
    """Re-measuring the whole file is explicit (`--all`), never what a bare command does by accident."""
    from msbench.cli import build_parser

    args = build_parser().parse_args([*argv, "--file", str(write(tmp_path / "host_cost.json", entry()))])
    with pytest.raises(UserError, match=message):
        calibration.calibrate_command(args)


def test_several_runs_keep_the_median_run_whole_and_list_every_run(monkeypatch):
    """`--runs 3`: one child process per run (processes disagree more than one's own segments); the entry is
    the run whose bottleneck is the median, as measured, with each run's bottleneck, date and load beside it."""
    bottlenecks = iter([0.042, 0.033, 0.037, 0.035])

    def one_run(spec, beside_others=False):
        b = next(bottlenecks)
        return {**entry(stages=[{"name": "map[0]", "cpu_seconds_per_sample": b, "python_seconds_per_sample": b / 2},
                                {"name": "thread 2", "cpu_seconds_per_sample": 0.003, "python_seconds_per_sample": 0}]),
                "measured_at": f"run {b}", "host": {"load_average_before": [0.1, 0.2, 0.3]}, "command": spec.command()}

    monkeypatch.setattr(calibration, "measure_run", one_run)
    spec = EntrySpec("yolov8n", "full", (), "generator")
    kept = calibration.measure_entry(spec, runs=3)
    assert calibration.bottleneck_seconds(kept) == 0.037 and kept["measured_at"] == "run 0.037"
    assert [r["bottleneck_cpu_seconds_per_sample"] for r in kept["runs"]] == [0.042, 0.033, 0.037]
    assert kept["command"] == "msbench calibrate host yolov8n --preset full --data-format generator --runs 3"
    single = calibration.measure_entry(spec, runs=1)
    assert "runs" not in single and single["command"].endswith("--data-format generator")
    with pytest.raises(UserError, match="--runs=0 is not allowed; allowed: a whole number >= 1"):
        calibration.measure_entry(spec, runs=0)
