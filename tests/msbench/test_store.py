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


# --- issue 43: records validated on read ------------------------------------------------------------

def corrupt_lines(tmp_path, *lines):
    """A run file: a good record, then `lines`, then another good record."""
    path = tmp_path / "r.jsonl"
    path.write_text(record(1).to_json_line() + "".join(line + "\n" for line in lines) + record(3).to_json_line())
    return path


@pytest.mark.parametrize("field, value", [("throughput", float("nan")), ("throughput", float("inf")),
                                          ("step_time_s", float("-inf"))])
def test_a_non_finite_metric_is_corrupt(tmp_path, field, value):
    data = record(2).to_dict()
    data["metrics"][field] = value
    path = corrupt_lines(tmp_path, json.dumps(data))
    with pytest.raises(CorruptRecordError, match=rf"r.jsonl:2: corrupt record \(.*metrics.{field}=.* allowed: a finite"):
        RunStore(path).load()


def test_an_infinite_interval_of_one_process_still_reads(tmp_path):
    data = record(2).to_dict()
    data["metrics"]["step_time_stats"]["ci95_rel"] = float("inf")
    assert len(RunStore(corrupt_lines(tmp_path, json.dumps(data))).load()) == 3


@pytest.mark.parametrize("where", ["cell_id", "cell.id"])
def test_a_cell_id_that_is_not_its_cells_hash_is_corrupt(tmp_path, where):
    data = record(2).to_dict()
    if where == "cell_id":
        data["cell_id"] = "../../etc/passwd"
    else:
        data["cell"]["id"] = "../../etc/passwd"
    with pytest.raises(CorruptRecordError, match=rf"r.jsonl:2: corrupt record \(.*{where}='../../etc/passwd' does not"):
        RunStore(corrupt_lines(tmp_path, json.dumps(data))).load()


def test_a_deeply_nested_line_is_corrupt_not_a_recursion_error(tmp_path):
    data = record(2).to_dict()
    data["metrics"]["extra"] = json.loads("[" * 500 + "]" * 500)
    deep = "[" * 100_000 + "]" * 100_000
    path = corrupt_lines(tmp_path, json.dumps(data), deep)
    with pytest.raises(CorruptRecordError, match=r"r.jsonl:2: corrupt record \(ValueError: nested deeper than 64"):
        RunStore(path).load()
    store = RunStore(path)
    assert [r.cell.settings.seed for r in store.load(skip_corrupt=True)] == [1, 3]
    assert [str(e) for e in store.skipped] == [f"{path}:2: corrupt record (ValueError: nested deeper than 64 levels)",
                                               f"{path}:3: corrupt record (ValueError: nested deeper than 64 levels)"]


def test_report_names_each_corrupt_line_and_reads_the_rest(tmp_path, capsys):
    from msbench.cli import main

    bad = record(2).to_dict()
    bad["metrics"]["throughput"] = float("nan")
    path = corrupt_lines(tmp_path, json.dumps(bad), "[" * 100_000 + "]" * 100_000)
    assert main(["report", str(path), "--md", str(tmp_path / "r.md")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (f"{path}:2: corrupt record (NotFiniteError: record.metrics.throughput=nan is not allowed; "
                      "allowed: a finite number); skipped")
    assert err[1] == f"{path}:3: corrupt record (ValueError: nested deeper than 64 levels); skipped"
    assert len(err) == 2 and len(load_records([path])) == 2


def test_an_empty_run_file_is_refused_like_an_empty_directory(tmp_path, capsys):
    from msbench.cli import main

    empty = tmp_path / "empty.jsonl"
    empty.touch()
    assert main(["report", str(empty), "--md", str(tmp_path / "r.md")]) == 2
    assert capsys.readouterr().err == f"msbench report: error: {empty}: an empty run file (0 bytes, no records)\n"
    assert not (tmp_path / "r.md").exists()
