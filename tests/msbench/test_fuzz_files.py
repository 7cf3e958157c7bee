"""Property-based mutation of valid matrix files and run records (hypothesis).

Every mutant is either accepted and round-trips (a matrix's cells rebuild with the same ids and run,
a record re-serialises to itself) or refused by the CLI with exit 2 and one line; never a traceback.
The CLI runs in-process (`msbench.cli.main`) for speed.
"""

import copy
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from msbench.cell import Cell
from msbench.cli import main
from msbench.records import Metrics, Record
from msbench.settings import make_settings
from msbench.store import RunStore

SUPPORT = Path(__file__).resolve().parents[1] / "support"
ECHO = "support_targets:EchoTarget"
FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

VALID_MATRICES = [
    {"name": "f", "targets": ["model:ascend910b"], "workloads": [{"name": "resnet50", "preset": "tiny"}],
     "base": {"mode": "graph"}, "axes": {"amp_level": ["O0", "O2"], "sink": [False, True]}},
    {"name": "g", "strategy": "ofat", "accuracy": False, "targets": ["model:ascend910a", "mindspore:cpu"],
     "workloads": [{"name": "bert-base", "preset": "tiny", "set": {"batch_size": 8}, "overrides": {"seq_len": 16}}],
     "axes": {"recompute": ["none", "full"], "seed": [1, 2]}, "baseline": {"seed": 1},
     "exclude": [{"workload": "bert-base", "recompute": "full"}], "include": [{"target": "mindspore:cpu", "seed": 9}]},
]
NAMES = st.sampled_from(["name", "targets", "workloads", "axes", "base", "include", "exclude", "strategy",
                         "accuracy", "preset", "seed", "amp_level", "mode", "target", "workload", "overrides",
                         "set", "batch_size", "colour", "sink", "../x"])
LEAVES = (st.booleans() | st.integers(-3, 2**40) | st.floats(allow_nan=True, allow_infinity=True)
          | st.text(max_size=8) | st.sampled_from(["model:ascend910b", "mindspore:cpu", "os:system", "this:s",
                                                    "resnet50", "O2", "O9", "graph", "tiny", "full", "grid",
                                                    "pairwise", "../x", "a/b", "", "true"]))
# Values a knob or key could really take: most mutants then stay valid, so the accept path is exercised too.
PLAUSIBLE = st.sampled_from(["O0", "O1", "O2", "O3", "graph", "pynative", True, False, 1, 2, 8, "none", "full",
                             "selective", "dynamic", "tiny", "resnet50", "bert-base", ["O0", "O2"], [1, 2], [True]])
VALUES = PLAUSIBLE | PLAUSIBLE | st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
                      max_leaves=6)


def toml_value(value):
    """An inline TOML value (the test writes what hypothesis generated; tomllib reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_key(key):
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_text(data):
    return "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in data.items())


def paths(value, prefix=()):
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from paths(child, prefix + (key,))


@st.composite
def mutants(draw, seeds):
    data = json.loads(json.dumps(draw(st.sampled_from(seeds))))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from([p for p in paths(data) if p]))
        parent = data
        for key in where[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        # Copies: PLAUSIBLE's lists are shared objects, and a later mutation appending to one would change
        # the strategy itself (hypothesis then sees inconsistent data generation).
        if action == "replace":
            parent[where[-1]] = copy.deepcopy(draw(VALUES))
        elif action == "delete":
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent[draw(NAMES)] = copy.deepcopy(draw(VALUES))
        else:
            parent.append(copy.deepcopy(draw(VALUES)))
    return data


def one_line_refusal(capsys, code):
    captured = capsys.readouterr()
    if code == 2:
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("msbench ") and "Traceback" not in captured.err, captured.err
        return None
    assert code == 0, captured.err
    return captured.out


@pytest.fixture
def echo_target(monkeypatch):
    monkeypatch.syspath_prepend(str(SUPPORT))


@pytest.mark.slow
@FUZZ
@given(data=mutants(VALID_MATRICES))
def test_a_mutated_matrix_is_refused_in_one_line_or_round_trips(tmp_path_factory, capsys, echo_target, data):
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "m.toml"
    path.write_text(toml_text(data))
    if one_line_refusal(capsys, main(["matrix", "show", str(path), "--max-cells", "64"])) is None:
        event("refused")
        return
    event("accepted")
    # Accepted: its cells rebuild with the same ids, and it runs (on a plugin target that is always ok),
    # one record per cell that is not excluded.
    on_echo = ["--target", ECHO, "--allow-plugin", ECHO, "--max-cells", "64"]
    shown = json.loads(one_line_refusal(capsys, main(["matrix", "show", str(path), "--json", *on_echo])))
    for c in shown["cells"]:
        if c["status"] == "ok":
            assert Cell.from_dict(c).id == c["id"]
    runnable = sorted(c["id"] for c in shown["cells"] if c["status"] != "excluded")
    code = main(["run", str(path), *on_echo, "--out", str(folder / "runs"), "--run-id", "r", "--quiet"])
    if not runnable:                                 # every cell excluded: a run of zero cells is refused
        assert code == 2 and "no cells to run" in capsys.readouterr().err
        return
    assert one_line_refusal(capsys, code) is not None
    assert sorted(r.cell_id for r in RunStore(folder / "runs" / "r.jsonl").load()) == runnable


def valid_record():
    cell = Cell(workload="resnet50", settings=make_settings({"mode": "graph", "amp_level": "O2"}),
                target="model:ascend910b", label="amp_level=O2")
    return Record(cell=cell, status="ok", metrics=Metrics(step_time_s=0.25, throughput=512.0,
                                                          peak_memory_bytes=2**30, accuracy=0.5), run_id="r")


@pytest.mark.slow
@FUZZ
@given(data=mutants([valid_record().to_dict()]))
def test_a_mutated_record_is_refused_in_one_line_or_round_trips(tmp_path_factory, capsys, data):
    folder = tmp_path_factory.mktemp("fuzzrec")
    run = folder / "r.jsonl"
    run.write_text(json.dumps(data) + "\n")
    code = main(["report", str(run), "--md", str(folder / "r.md")])
    if one_line_refusal(capsys, code) is None:
        event("refused")
        return
    event("accepted")
    record = RunStore(run).load()[0]
    assert Record.from_json_line(record.to_json_line()).to_dict() == record.to_dict()
