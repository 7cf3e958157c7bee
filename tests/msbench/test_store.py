import json

import pytest

from msbench.cell import Cell
from msbench.records import Metrics, Record, StepStats
from msbench.store import CorruptRecordError, RunStore, load_records, records_frame


def record(seed=1, status="ok"):
    from msbench.settings import make_settings

    cell = Cell(workload="resnet50", settings=make_settings({"seed": seed}), target="mindspore:cpu")
    stats = StepStats(median=0.1, iqr=0.01, cv=0.02, ci95_rel=0.01, samples=[0.1, 0.11, 0.09])
    return Record(cell=cell, status=status, metrics=Metrics(step_time_s=0.1, step_time_stats=stats, throughput=80.0,
                                                           breakdown={"compute": 0.08, "data": 0.02}),
                  provenance={"commit": "abc"})


def test_round_trip_and_frame(tmp_path):
    store = RunStore(tmp_path / "r.jsonl")
    store.append(record(1))
    store.append(record(2, "oom"))
    loaded = store.load()
    assert [r.to_dict() for r in loaded] == [record(1).to_dict() | {"started_at": loaded[0].started_at},
                                             record(2, "oom").to_dict() | {"started_at": loaded[1].started_at}]
    frame = records_frame(load_records([tmp_path]))
    assert list(frame["status"]) == ["ok", "oom"]
    assert frame.loc[0, "breakdown.compute"] == 0.08 and frame.loc[0, "step_time_cv"] == 0.02
    assert frame.loc[0, "commit"] == "abc" and frame.loc[0, "seed"] == 1


def test_garbled_line_is_reported_with_its_number(tmp_path):
    path = tmp_path / "r.jsonl"
    store = RunStore(path)
    store.append(record(1))
    with open(path, "a") as fh:
        fh.write("{not json\n")
    store.append(record(3))
    with pytest.raises(CorruptRecordError, match=r"r.jsonl:2: corrupt record"):
        store.load()


def test_wrong_schema_and_unknown_metric_are_corrupt(tmp_path):
    path = tmp_path / "r.jsonl"
    data = record(1).to_dict()
    path.write_text(json.dumps({**data, "schema": 99}) + "\n")
    with pytest.raises(CorruptRecordError, match="schema=99"):
        RunStore(path).load()
    path.write_text(json.dumps({**data, "metrics": {"speed": 1}}) + "\n")
    with pytest.raises(CorruptRecordError, match="metrics.speed"):
        RunStore(path).load()


def test_truncated_last_line_is_refused_then_repaired_on_resume(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    store = RunStore(path)
    store.append(record(1))
    with open(path, "a") as fh:
        fh.write(record(2).to_json_line()[:40])
    with pytest.raises(CorruptRecordError, match="r.jsonl:2: corrupt record \\(truncated"):
        store.load()
    assert [r.cell.settings.seed for r in store.load(repair=True)] == [1]
    assert "truncated last record moved" in capsys.readouterr().err
    assert (tmp_path / "r.jsonl.partial").exists() and store.load()


def test_invalid_status_is_refused():
    with pytest.raises(ValueError, match="status='great'"):
        record(1, "great")
