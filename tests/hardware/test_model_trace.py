"""The predicted step as a Chrome trace: a valid trace-event file whose spans add up to the prediction."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import jsonschema
import pytest

from hardware.model.predict import PHASES, predict
from hardware.model.profile import load_profile
from hardware.model.trace import COMM_TID, COMPUTE_TID, DEVICE_PID, DISPATCH_TID, HOST_PID, trace_events, write_trace
from model_graphs import FakeHost, many_small, mlp_step
from msbench.settings import Settings

REPO = Path(__file__).resolve().parents[2]
# The JSON Object Format of Google's Trace Event Format: complete events ("X") and metadata ("M").
TRACE_SCHEMA = {
    "type": "object", "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "required": ["name", "ph", "ts", "dur", "pid", "tid"],
             "properties": {"ph": {"const": "X"}, "name": {"type": "string"}, "cat": {"type": "string"},
                            "ts": {"type": "number", "minimum": 0}, "dur": {"type": "number", "minimum": 0},
                            "pid": {"type": "integer"}, "tid": {"type": "integer"}, "args": {"type": "object"}}},
            {"type": "object", "required": ["name", "ph", "pid", "args"],
             "properties": {"ph": {"const": "M"}, "name": {"enum": ["process_name", "thread_name"]},
                            "args": {"type": "object", "required": ["name"]}}},
        ]}},
    },
}
CASES = {
    "async-data-bound": (mlp_step(256), Settings(mode="graph", workers=2), "ascend910b", FakeHost(2e-3, 4096)),
    "no-prefetch-8-devices": (mlp_step(64), Settings(mode="graph", devices=8, prefetch=0, workers=4), "ascend910a",
                              FakeHost(1e-5, 1000)),
    "o2-sink": (mlp_step(128), Settings(mode="graph", jit_level="O2", sink=True, devices=16), "ascend910b",
                FakeHost(1e-6, 100)),
    "pynative-dispatch-bound": (many_small(200), Settings(mode="pynative"), "ascend910b", FakeHost()),
    "cpu-shares-device": (mlp_step(32), Settings(mode="graph"), "cpu", FakeHost(1e-4, 100)),
}


def spans(trace, pid=None, tid=None, cat=None):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and (pid is None or e["pid"] == pid)
            and (tid is None or e["tid"] == tid) and (cat is None or e.get("cat") == cat)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_is_valid_and_its_spans_add_up_to_the_prediction(case):
    g, settings, profile_name, host = CASES[case]
    p = predict(g, settings, load_profile(profile_name), host)
    trace = json.loads(json.dumps(trace_events(p, case)))
    jsonschema.validate(trace, TRACE_SCHEMA)
    step_us = p.step_time_s * 1e6
    rounding = 1e-3 * len(trace["traceEvents"])                # each span is rounded to the nanosecond
    # The step ends where the last span ends; the host thread's serial spans and the kernel slots fill it.
    assert max(e["ts"] + e["dur"] for e in spans(trace)) == pytest.approx(step_us, abs=rounding)
    assert trace["otherData"]["end_us"] == pytest.approx(step_us, abs=rounding)
    kernels = spans(trace, DEVICE_PID, COMPUTE_TID)
    assert len(kernels) == p.detail["kernels"]
    by_phase = defaultdict(float)
    for k in kernels:
        by_phase[k["args"]["phase"]] += k["dur"]
    for phase in PHASES:
        assert by_phase[phase] == pytest.approx(p.breakdown[phase] * 1e6, abs=rounding)
    host = spans(trace, HOST_PID, DISPATCH_TID)
    launches = [e for e in host if e["cat"] == "dispatch"]
    serial = [e for e in host if e["cat"] != "dispatch"]
    slots_end = max(k["ts"] + k["dur"] for k in kernels)
    totals = {c: sum(e["dur"] for e in serial if e["cat"] == c) for c in ("transfer", "comm", "roundtrip", "data")}
    assert totals["transfer"] == pytest.approx(p.breakdown["transfer"] * 1e6, abs=rounding)
    assert totals["comm"] == pytest.approx(p.breakdown["comm"] * 1e6, abs=rounding)
    assert totals["roundtrip"] == pytest.approx(p.breakdown["roundtrip"] * 1e6, abs=rounding)
    assert totals["data"] == pytest.approx(p.breakdown["data"] * 1e6, abs=rounding)
    # kernel path = device kernels + dispatch stalls (the breakdown's "dispatch")
    path_us = sum(p.breakdown[ph] for ph in PHASES) * 1e6 + p.breakdown["dispatch"] * 1e6
    assert slots_end - min(min(k["ts"] for k in kernels), min(e["ts"] for e in launches)) == \
        pytest.approx(path_us, abs=rounding)
    assert all(e["dur"] > 0 for e in launches) and len(launches) == len(kernels)
    buckets = spans(trace, DEVICE_PID, COMM_TID)
    assert len(buckets) == p.detail["comm_buckets"]
    if buckets:                                                # ends where the exposed all-reduce ends
        assert max(b["ts"] + b["dur"] for b in buckets) == pytest.approx(slots_end + totals["comm"], abs=rounding)
        assert sum(b["dur"] for b in buckets) == pytest.approx(p.detail["comm_total_s"] * 1e6, rel=1e-5)
    workers = [e for e in spans(trace, HOST_PID) if e["tid"] >= 10]
    assert len(workers) == settings.workers or p.detail["data_total_s"] == 0
    assert all(e["dur"] == pytest.approx(p.detail["data_total_s"] * 1e6, abs=1e-3) for e in workers)


def test_trace_bytes_are_deterministic(tmp_path):
    g, settings, profile_name, host = CASES["no-prefetch-8-devices"]
    first = write_trace(tmp_path / "a.json", predict(g, settings, load_profile(profile_name), host), "t")
    second = write_trace(tmp_path / "b.json", predict(g, settings, load_profile(profile_name), host), "t")
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["resnet50", "bert-base"])
def test_cli_trace_of_a_real_cell_matches_its_prediction(workload, tmp_path):
    out = tmp_path / f"{workload}.json"
    proc = subprocess.run([sys.executable, "-m", "msbench.cli", "predict", workload, "--preset", "tiny",
                           "--hardware", "ascend910b", "--set", "devices=8", "--json", "--trace", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    prediction = json.loads(proc.stdout)
    trace = json.loads(out.read_text())
    jsonschema.validate(trace, TRACE_SCHEMA)
    assert len(spans(trace, DEVICE_PID, COMPUTE_TID)) == prediction["detail"]["kernels"]
    end = max(e["ts"] + e["dur"] for e in spans(trace))
    assert end == pytest.approx(prediction["step_time_s"] * 1e6, rel=1e-5)


def test_run_trace_dir_is_refused_for_measuring_targets(tmp_path):
    from msbench.errors import UserError
    from msbench.runner import run_matrix

    with pytest.raises(UserError, match="--trace-dir"):
        run_matrix(REPO / "matrices" / "smoke.toml", target="mindspore:cpu", out=tmp_path, progress=False,
                   trace_dir=tmp_path / "traces")


@pytest.mark.slow
def test_run_trace_dir_writes_one_trace_per_cell(tmp_path):
    from msbench.runner import run_matrix

    matrix = tmp_path / "one.toml"
    matrix.write_text('name = "one"\ndescription = "one cell"\ntargets = ["model:ascend910b"]\nstrategy = "ofat"\n'
                      'accuracy = false\n[[workloads]]\nname = "resnet50"\npreset = "tiny"\n[base]\nmode = "graph"\n'
                      '[axes]\namp_level = ["O0", "O2"]\n')
    result = run_matrix(matrix, out=tmp_path / "runs", progress=False, trace_dir=tmp_path / "traces")
    written = sorted((tmp_path / "traces").glob("*.trace.json"))
    assert [p.name for p in written] == sorted(f"{r.cell_id}.trace.json" for r in result.records)
    for path, record in zip(written, sorted(result.records, key=lambda r: r.cell_id)):
        trace = json.loads(path.read_text())
        jsonschema.validate(trace, TRACE_SCHEMA)
        end = max(e["ts"] + e["dur"] for e in spans(trace))
        assert end == pytest.approx(record.metrics.step_time_s * 1e6, rel=1e-5)
