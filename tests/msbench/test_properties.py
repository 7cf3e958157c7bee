"""Property tests (hypothesis): arbitrary valid TOML matrices expand to cells whose ids do not depend
on how the file orders its keys, and whose records (every status) read back equal."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hardware.knob_table import walk_values
from msbench.cell import Cell
from msbench.matrix_file import parse_matrix
from msbench.records import Metrics, Record, StepStats

AXIS_KNOBS = ("mode", "jit_level", "graph_kernel", "amp_level", "loss_scale", "keep_batchnorm_fp32", "batch_size",
              "grad_accum", "recompute", "workers", "data_format", "cache", "sink", "sink_size", "devices", "seed")
TARGETS = ("model:ascend910b", "model:cpu", "mindspore:cpu")
WORKLOADS = ("resnet50", "bert-base", "yolov8n")


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(type(value).__name__)


def to_toml(data: dict) -> str:
    """A matrix as TOML text, keys in the dict's own order (so reordering the dict reorders the file)."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, (dict, list)) or
             (isinstance(v, list) and not (v and isinstance(v[0], dict)))]
    for wl in data["workloads"]:
        lines += ["[[workloads]]", *(f"{k} = {toml_value(v)}" for k, v in wl.items())]
    for table in ("base", "axes"):
        lines += [f"[{table}]", *(f"{k} = {toml_value(v)}" for k, v in data[table].items())]
    return "\n".join(lines) + "\n"


def knob_values(knob: str) -> st.SearchStrategy:
    return st.sampled_from([v for v in walk_values(knob) if v is not None])   # TOML has no null


@st.composite
def matrices(draw: st.DrawFn) -> dict:
    axes = {k: draw(st.lists(knob_values(k), min_size=1, max_size=3, unique=True))
            for k in draw(st.lists(st.sampled_from(AXIS_KNOBS), min_size=1, max_size=4, unique=True))}
    base = {k: draw(knob_values(k)) for k in draw(st.lists(st.sampled_from(AXIS_KNOBS), max_size=2, unique=True))}
    return {
        "name": "prop",
        "strategy": draw(st.sampled_from(["grid", "ofat"])),
        "targets": draw(st.lists(st.sampled_from(TARGETS), min_size=1, max_size=2, unique=True)),
        "workloads": [{"name": w} for w in draw(st.lists(st.sampled_from(WORKLOADS), min_size=1, max_size=2,
                                                         unique=True))],
        "base": base,
        "axes": axes,
    }


def reordered(data: dict, rnd) -> dict:
    """The same matrix with every table's keys in another order (list values keep their order: it is data)."""
    def shuffle(d: dict) -> dict:
        keys = list(d)
        rnd.shuffle(keys)
        return {k: d[k] for k in keys}
    return shuffle({**data, "base": shuffle(data["base"]), "axes": shuffle(data["axes"])})


def expand(data: dict):
    text = to_toml(data)
    return parse_matrix(tomllib.loads(text), "prop.toml", "prop").expand()


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@PROPERTY
@given(matrices(), st.randoms(use_true_random=False))
def test_cell_ids_do_not_depend_on_key_order(data, rnd):
    first = expand(data)
    again = expand(reordered(data, rnd))
    assert sorted((e.cell.id, e.status, e.cell.label) for e in first.entries) == \
        sorted((e.cell.id, e.status, e.cell.label) for e in again.entries)
    for e in first.entries:                   # an id is a function of the cell alone, also read back
        assert Cell.from_dict(json.loads(json.dumps(e.cell.to_dict()))).id == e.cell.id


def record_for(entry, i: int) -> Record:
    status = "invalid" if entry.status == "invalid" else ("ok", "oom", "failed", "timeout", "unsupported")[i % 5]
    metrics = Metrics()
    if status == "ok":
        samples = [0.01 + 0.001 * j for j in range(5)]
        metrics = Metrics(step_time_s=0.012, throughput=1000.0 / (i + 1), peak_memory_bytes=2**30 + i,
                          step_time_stats=StepStats(median=0.012, iqr=0.002, cv=0.1, ci95_rel=0.02, samples=samples),
                          breakdown={"compute": 0.01, "data": 0.002}, extra={"note": "x" * i})
    return Record(cell=entry.cell, status=status, reason=None if status == "ok" else f"{status} #{i}",
                  metrics=metrics, fingerprint=f"fp{i}" if status != "invalid" else None, run_id="prop",
                  started_at=1.0 + i, provenance={"commit": "a" * 40})


@pytest.mark.slow
@PROPERTY
@given(matrices())
def test_records_of_every_cell_read_back_equal(data):
    for i, entry in enumerate(expand(data).entries):
        record = record_for(entry, i)
        back = Record.from_json_line(record.to_json_line())
        assert back.to_dict() == record.to_dict() and back.cell_id == entry.cell.id
        assert back.cell.settings.to_dict() == entry.cell.settings.to_dict()
