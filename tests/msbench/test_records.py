"""Records read back: today's schema-1 files (a checked-in fixture written by main's code at a902210),
every status, invalid cells whose settings break a rule, and fingerprints that make --resume redo a cell."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from msbench.cli import main
from msbench.records import SCHEMA, Record, migrate, migrate_1_to_2
from msbench.runner import run_matrix
from msbench.store import RunStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "records_v1.jsonl"
SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture
def support_path(monkeypatch):
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]))


def grid(tmp_path: Path, target: str) -> Path:
    """The grid of issue 13: mode x sink has one impossible corner (pynative + sink), x seeds that pick faults."""
    path = tmp_path / "grid.toml"
    path.write_text(textwrap.dedent(f"""
        name = "grid"
        targets = ["{target}"]
        strategy = "grid"
        [[workloads]]
        name = "resnet50"
        [axes]
        mode = ["graph", "pynative"]
        sink = [false, true]
        seed = [1, 4, 5, 6]
    """))
    return path


def test_schema_1_fixture_reads_back_with_every_status_and_migrates():
    lines = FIXTURE.read_text().splitlines()
    raw = [json.loads(line) for line in lines]
    assert {d["schema"] for d in raw} == {1}
    records = RunStore(FIXTURE).load()
    assert {r.status for r in records} == {"ok", "invalid", "unsupported", "failed", "oom"}
    for data, rec in zip(raw, records):
        assert rec.cell_id == data["cell_id"] and rec.schema == SCHEMA and rec.fingerprint is None
        assert rec.metrics.step_time_s == data["metrics"]["step_time_s"]
    invalid = [r for r in records if r.status == "invalid"]
    assert invalid and all(r.cell.settings.sink and r.cell.settings.mode == "pynative" for r in invalid)
    again = [Record.from_json_line(r.to_json_line()) for r in records]
    assert [r.to_dict() for r in again] == [r.to_dict() for r in records]


def test_migration_is_explicit_and_unknown_schemas_are_refused():
    old = json.loads(FIXTURE.read_text().splitlines()[0])
    assert migrate_1_to_2(old) == {**old, "schema": 2, "fingerprint": None}
    assert migrate({**old, "schema": 2, "fingerprint": "abc"})["fingerprint"] == "abc"
    for bad in (0, 3, None):
        with pytest.raises(ValueError, match=f"schema={bad!r} is not supported; allowed: 1, 2"):
            Record.from_dict({**old, "schema": bad})


@pytest.mark.slow
def test_a_run_with_invalid_unsupported_failed_and_oom_records_reports(tmp_path, capsys):
    md = tmp_path / "report.md"
    assert main(["report", str(FIXTURE), "--md", str(md)]) == 0
    text = md.read_text()
    assert "invalid" in text and "oom" in text and "unsupported" in text and "failed" in text


FINGERPRINTED = ("support_targets:FingerprintedTarget",)   # matrix files name it; the allow-list makes it code


@pytest.mark.slow
def test_the_mode_by_sink_grid_runs_reports_and_resumes(tmp_path, support_path, capsys):
    path = grid(tmp_path, "support_targets:FingerprintedTarget")
    first = run_matrix(path, plugins=FINGERPRINTED, out=tmp_path / "runs", run_id="grid", progress=False)
    statuses = sorted({r.status for r in first.records})
    assert statuses == ["failed", "invalid", "ok", "oom", "unsupported"] and len(first.records) == 16
    assert all(r.fingerprint == ("v1" if r.status != "invalid" else None) for r in first.records)
    md = tmp_path / "report.md"
    assert main(["report", str(first.path), "--md", str(md)]) == 0
    again = run_matrix(path, plugins=FINGERPRINTED, out=tmp_path / "runs", run_id="grid", resume=True, progress=False)
    assert again.records == [] and again.rerun == 0
    assert len(RunStore(first.path).load()) == 16


@pytest.mark.slow
def test_resume_reruns_the_cells_whose_fingerprint_changed_and_shows_the_diff(tmp_path, support_path, monkeypatch,
                                                                              capsys):
    path = grid(tmp_path, "support_targets:FingerprintedTarget")
    first = run_matrix(path, plugins=FINGERPRINTED, out=tmp_path / "runs", run_id="grid", progress=False)
    monkeypatch.setenv("SUPPORT_FINGERPRINT", "v2")
    monkeypatch.setenv("SUPPORT_SLOWDOWN", "3")
    capsys.readouterr()
    again = run_matrix(path, plugins=FINGERPRINTED, out=tmp_path / "runs", run_id="grid", resume=True, progress=True)
    out = capsys.readouterr().out
    valid = [r for r in first.records if r.status != "invalid"]
    assert again.rerun == len(valid) == 12 and len(again.records) == 12
    assert f"{len(valid)} cells re-run: their inputs changed" in out
    assert "step_s 0.01 -> 0.03" in out                    # the base cell (seed 1) is 3x slower now
    latest = {r.cell_id: r for r in RunStore(first.path).load()}
    assert {r.fingerprint for r in latest.values() if r.status != "invalid"} == {"v2"}
    third = run_matrix(path, plugins=FINGERPRINTED, out=tmp_path / "runs", run_id="grid", resume=True, progress=False)
    assert third.rerun == 0 and third.records == []


def test_a_schema_1_record_is_rerun_on_a_fingerprinting_target(tmp_path, support_path):
    """Old records carry no fingerprint: what produced them is unknown, so their cells run again."""
    path = grid(tmp_path, "support_targets:FingerprintedTarget")
    runs = tmp_path / "runs"
    runs.mkdir()
    moved = []
    for line in FIXTURE.read_text().splitlines():     # the fixture's records, as if made on this target
        data = json.loads(line)
        data.pop("cell_id")                           # both ids name the old target's cell: a new target, a new id
        data["cell"] = {k: v for k, v in data["cell"].items() if k != "id"} | {"target": "support_targets:FingerprintedTarget"}
        moved.append(json.dumps(data) + "\n")
    (runs / "grid.jsonl").write_text("".join(moved))
    result = run_matrix(path, plugins=FINGERPRINTED, out=runs, run_id="grid", resume=True, progress=False)
    assert result.rerun == 12 and {r.status for r in result.records} == {"ok", "failed", "oom", "unsupported"}
