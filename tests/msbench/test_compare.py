"""msbench compare: direction per metric, thresholds, asv results and run records, bad input."""

from __future__ import annotations

import json
import math

import pytest

from msbench.asv_results import load_results, result_commits
from msbench.cell import Cell
from msbench.cli import main
from msbench.compare import compare_values
from msbench.records import Metrics, Record
from msbench.settings import Settings
from msbench.store import RunStore
from msbench.tracked import TRACKED, tracked_values

A, B = "a" * 40, "b" * 40
COLUMNS = ["result", "params", "version", "started_at", "duration"]
VARIANTS = ["base", "amp_level=O2", "sink=true"]
PARAMS = [["'resnet50'"], [repr(v) for v in VARIANTS], ["'model:ascend910b'"]]
BENCH = {"throughput": "Performance", "seconds_per_sample": "Performance", "peak_memory": "Performance",
         "accuracy_delta": "Accuracy", "accuracy_drop": "Accuracy"}
NAN = float("nan")


def write_asv(root, commit, values, machine="box", env="virtualenv-py3.11", version="1"):
    """An asv results directory as asv 0.6.6 writes it; `values` maps metric -> one value per variant."""
    suite = {f"matrix_cells.{cls}.track_{m}": {"name": f"matrix_cells.{cls}.track_{m}", "type": "track",
                                                "param_names": ["workload", "variant", "target"], "params": PARAMS,
                                                "unit": TRACKED[m].unit, "version": "1"} for m, cls in BENCH.items()}
    suite["version"] = 2
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmarks.json").write_text(json.dumps(suite))
    results = {f"matrix_cells.{BENCH[m]}.track_{m}": [vals, PARAMS, version, 0, 0.5] for m, vals in values.items()}
    (root / machine).mkdir(exist_ok=True)
    (root / machine / f"{commit[:8]}-{env}.json").write_text(json.dumps(
        {"commit_hash": commit, "env_name": env, "date": 0, "params": {}, "python": "3.11", "requirements": {},
         "env_vars": {}, "result_columns": COLUMNS, "results": results, "durations": {}, "version": 2}))


def perf(throughput, memory):
    """Performance values per variant (sink=true is skipped: NaN)."""
    return {"throughput": [throughput, 2 * throughput, NAN],
            "seconds_per_sample": [1 / throughput, 0.5 / throughput, NAN],
            "peak_memory": [memory, memory, NAN]}


def run_compare(capsys, *argv):
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def two_commits(tmp_path):
    root = tmp_path / "results" / "asv"
    write_asv(root, A, {**perf(1000.0, 2.0e9), "accuracy_delta": [0.0, -0.4, NAN], "accuracy_drop": [0.0, 0.4, NAN]})
    write_asv(root, B, {**perf(800.0, 2.4e9), "accuracy_delta": [0.0, -0.6, NAN], "accuracy_drop": [0.0, 0.6, NAN]})
    return tmp_path / "results"


def test_slower_and_bigger_is_a_regression_by_each_metrics_direction(two_commits, capsys):
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(two_commits), "--json")
    assert code == 1
    data = json.loads(out)
    rows = {(r["variant"], r["metric"]): r for r in data["rows"]}
    thr = rows[("base", "throughput")]
    assert (thr["before"], thr["after"], thr["direction"], thr["flag"]) == (1000.0, 800.0, "worse", "regression")
    assert thr["change"] == pytest.approx(-0.2)
    assert rows[("base", "seconds_per_sample")]["change"] == pytest.approx(0.25)
    assert rows[("base", "peak_memory")]["flag"] == "regression"
    # accuracy moved 0.2 pp: worse, but inside the 1 pp tolerance
    acc = rows[("amp_level=O2", "accuracy_delta")]
    assert (acc["direction"], acc["flag"]) == ("worse", "") and acc["change"] == pytest.approx(-0.2)
    assert ("sink=true", "throughput") not in rows          # skipped at both commits
    assert data["regressions"] == 6 and data["rows"][0]["flag"] == "regression"


def test_reverse_comparison_reports_improvements_and_exits_zero(two_commits, capsys):
    code, out, _ = run_compare(capsys, B[:10], A[:10], "--results", str(two_commits))
    assert code == 0
    assert "| resnet50 | base | model:ascend910b | throughput | 800 samples/s | 1000 samples/s | +25.0% | better | improvement |" in out
    assert "| peak_memory | 2.235 GiB | 1.863 GiB | -16.7% | better | improvement |" in out
    assert "improvement: 6" in out


def test_threshold_decides_what_is_flagged(tmp_path, capsys):
    root = tmp_path / "asv"
    write_asv(root, A, perf(1000.0, 1e9))
    write_asv(root, B, perf(960.0, 1e9))
    assert run_compare(capsys, A[:8], B[:8], "--results", str(root))[0] == 0          # -4 % < 5 %
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(root), "--threshold", "0.03")
    assert code == 1 and "| -4.0% | worse | **regression** |" in out


def test_accuracy_is_compared_in_percentage_points(tmp_path, capsys):
    root = tmp_path / "asv"
    write_asv(root, A, {"accuracy_delta": [0.0, -0.5, NAN], "accuracy_drop": [0.0, 0.5, NAN]})
    write_asv(root, B, {"accuracy_delta": [0.0, -2.5, NAN], "accuracy_drop": [0.0, 2.5, NAN]})
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(root), "--json")
    rows = {r["metric"]: r for r in json.loads(out)["rows"] if r["variant"] == "amp_level=O2"}
    assert code == 1
    assert rows["accuracy_delta"]["change"] == pytest.approx(-2.0) and rows["accuracy_delta"]["flag"] == "regression"
    assert rows["accuracy_drop"]["change"] == pytest.approx(2.0) and rows["accuracy_drop"]["direction"] == "worse"


def test_a_cell_that_stops_producing_numbers_is_lost(tmp_path, capsys):
    root = tmp_path / "asv"
    write_asv(root, A, {"throughput": [1000.0, 2000.0, NAN]})
    write_asv(root, B, {"throughput": [1000.0, None, NAN]})       # amp_level=O2 failed (null)
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(root))
    assert code == 1 and "| amp_level=O2 | model:ascend910b | throughput | 2000 samples/s | n/a |  |  | **lost** |" in out


def test_compare_values_zero_before_and_equal():
    drop = TRACKED["accuracy_drop"]
    thr = TRACKED["throughput"]
    assert compare_values(thr, 0.0, 5.0, 0.05, 1.0) == (None, "better", True)
    assert compare_values(thr, 5.0, 5.0, 0.05, 1.0) == (0.0, "same", False)
    assert compare_values(drop, 0.0, 0.5, 0.05, 1.0) == (0.5, "worse", False)


def test_asv_loader_statuses_and_commits(two_commits):
    values = load_results(two_commits / "asv")
    statuses = {(v.commit, v.param_dict["variant"], v.status) for v in values if v.benchmark.endswith("throughput")}
    assert (A, "sink=true", "skipped") in statuses and (B, "base", "ok") in statuses
    assert result_commits(two_commits / "asv") == {A, B}
    assert result_commits(two_commits / "asv", machine="other") == set()


def make_record(commit, throughput, memory, dirty=False, label="base", status="ok"):
    settings = Settings() if label == "base" else Settings(amp_level="O2")
    cell = Cell(workload="resnet50", preset="tiny", settings=settings, label=label)
    metrics = Metrics(throughput=throughput, peak_memory_bytes=memory) if status == "ok" else Metrics()
    return Record(cell=cell, status=status, metrics=metrics, provenance={"commit": commit, "dirty": dirty})


def test_run_records_are_compared_by_their_commit(tmp_path, capsys):
    store = RunStore(tmp_path / "runs" / "nightly.jsonl")
    for rec in (make_record(A, 500.0, 1 << 30), make_record(B, 400.0, 1 << 30),
                make_record(B, 1.0, 1, dirty=True),            # a dirty tree's numbers are ignored
                make_record(A, 900.0, 1 << 30, label="amp_level=O2"),
                make_record(B, None, None, label="amp_level=O2", status="oom")):
        store.append(rec)
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(tmp_path / "runs"), "--json")
    rows = {(r["variant"], r["metric"]): r for r in json.loads(out)["rows"]}
    assert code == 1
    assert rows[("base", "throughput")]["after"] == 400.0 and rows[("base", "throughput")]["flag"] == "regression"
    assert rows[("base", "peak_memory")]["flag"] == ""
    assert rows[("amp_level=O2", "throughput")]["flag"] == "lost"
    assert rows[("base", "throughput")]["source"] == "runs"


def test_two_cells_sharing_a_label_stay_two_rows(tmp_path, capsys):
    """Labels are for display: two matrices can both call different cells `amp`; pairing is by cell id."""
    def rec(commit, settings, throughput):
        cell = Cell(workload="resnet50", preset="tiny", settings=settings, label="amp")
        return Record(cell=cell, status="ok", metrics=Metrics(throughput=throughput, peak_memory_bytes=1 << 30),
                      provenance={"commit": commit, "dirty": False})
    o2, o3 = Settings(amp_level="O2"), Settings(amp_level="O3")
    store = RunStore(tmp_path / "runs" / "two.jsonl")
    for r in (rec(A, o2, 500.0), rec(A, o3, 800.0), rec(B, o2, 500.0), rec(B, o3, 400.0)):
        store.append(r)
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(tmp_path / "runs"), "--json")
    rows = [r for r in json.loads(out)["rows"] if r["metric"] == "throughput"]
    by_id = {r["cell_id"]: r for r in rows}
    o2_id, o3_id = (Cell(workload="resnet50", settings=s, label="amp").id for s in (o2, o3))
    assert len(rows) == 2 and set(by_id) == {o2_id, o3_id}
    assert (by_id[o2_id]["before"], by_id[o2_id]["after"], by_id[o2_id]["flag"]) == (500.0, 500.0, "")
    assert (by_id[o3_id]["before"], by_id[o3_id]["after"], by_id[o3_id]["flag"]) == (800.0, 400.0, "regression")
    assert all(r["variant"] == "amp" for r in rows) and code == 1
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(tmp_path / "runs"))
    assert o2_id in out and o3_id in out


def test_tracked_values_of_a_record():
    values = tracked_values(Metrics(throughput=250.0, peak_memory_bytes=1024, accuracy_delta_pp=-1.5))
    assert values == {"throughput": 250.0, "seconds_per_sample": 0.004, "peak_memory": 1024.0,
                      "accuracy_delta": -1.5, "accuracy_drop": 1.5}
    assert tracked_values(Metrics(accuracy_delta_pp=0.7))["accuracy_drop"] == 0.0
    assert all(v is None for v in tracked_values(Metrics()).values())


def test_unknown_commit_is_one_clear_line(two_commits, capsys):
    code, out, err = run_compare(capsys, "c0ffee00", B[:8], "--results", str(two_commits))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "'c0ffee00' has no results" in err and "aaaaaaaa, bbbbbbbb" in err


def test_ambiguous_prefix(tmp_path, capsys):
    root = tmp_path / "asv"
    write_asv(root, "ab" + "1" * 38, perf(1.0, 1.0))
    write_asv(root, "ab" + "2" * 38, perf(1.0, 1.0))
    code, _, err = run_compare(capsys, "ab", "ab22", "--results", str(root))
    assert code == 2 and "'ab' is ambiguous" not in err          # too short to be a hash prefix
    code, _, err = run_compare(capsys, "ab11", "ab2", "--results", str(root))
    assert code == 2 and "ab2" in err
    root2 = tmp_path / "asv2"
    write_asv(root2, "abcd" + "1" * 36, perf(1.0, 1.0))
    write_asv(root2, "abcd" + "2" * 36, perf(1.0, 1.0))
    code, _, err = run_compare(capsys, "abcd", "abcd2", "--results", str(root2))
    assert code == 2 and "'abcd' is ambiguous" in err


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"commit_hash": A, "version": 2})])
def test_corrupt_asv_results_file(two_commits, capsys, content):
    bad = two_commits / "asv" / "box" / "cccccccc-virtualenv-py3.11.json"
    bad.write_text(content)
    code, out, err = run_compare(capsys, A[:8], B[:8], "--results", str(two_commits))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(bad) in err and "corrupt asv results file" in err


def test_corrupt_run_file_names_file_and_line(tmp_path, capsys):
    runs = tmp_path / "runs"
    RunStore(runs / "a.jsonl").append(make_record(A, 1.0, 1))
    with open(runs / "a.jsonl", "a") as fh:
        fh.write('{"schema": 1, "status": "ok"}\n')
    code, _, err = run_compare(capsys, A[:8], B[:8], "--results", str(runs))
    assert code == 2 and f"{runs / 'a.jsonl'}:2: corrupt record" in err


def test_missing_results_and_bad_threshold(tmp_path, capsys):
    code, _, err = run_compare(capsys, A, B, "--results", str(tmp_path / "nowhere"))
    assert code == 2 and "no such file or directory" in err
    code, _, err = run_compare(capsys, A, B, "--threshold", "0")
    assert code == 2 and "--threshold=0.0 is not allowed" in err


def test_git_revisions_resolve_to_commits_with_results(tmp_path, capsys, monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i in range(2):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
    head, prev = (subprocess.run([*git, "rev-parse", rev], capture_output=True, text=True, check=True).stdout.strip()
                  for rev in ("HEAD", "HEAD~1"))
    write_asv(repo / "results" / "asv", prev, perf(100.0, 1.0))
    write_asv(repo / "results" / "asv", head, perf(100.0, 1.0))
    monkeypatch.chdir(repo)
    code, out, _ = run_compare(capsys, "HEAD~1", "main", "--json")
    assert code == 0 and (json.loads(out)["before"], json.loads(out)["after"]) == (prev, head)
    assert not any(math.isnan(r["change"]) for r in json.loads(out)["rows"] if r["change"] is not None)


def test_timings_under_very_different_conditions_are_not_called_regressions(tmp_path, capsys):
    quiet = {"cores": 2, "load_before": [0.1, 0.1, 0.1], "others_during": 0.05}
    loaded = {"cores": 2, "load_before": [3.5, 3.0, 3.0], "others_during": 0.9}
    store = RunStore(tmp_path / "runs" / "nightly.jsonl")
    for commit, throughput, cond in ((A, 500.0, quiet), (B, 250.0, loaded)):
        rec = make_record(commit, throughput, 1 << 30)
        rec.metrics.accuracy_delta_pp = 0.0 if commit == A else -5.0
        rec.metrics.extra["conditions"] = cond
        store.append(rec)
    code, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(tmp_path / "runs"), "--json")
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert rows["throughput"]["flag"] == "conditions differ" and "overloaded" in rows["throughput"]["note"]
    assert rows["accuracy_delta"]["flag"] == "regression" and code == 1     # numerics do not depend on load
    _, out, _ = run_compare(capsys, A[:8], B[:8], "--results", str(tmp_path / "runs"))
    assert "conditions differ: one ran overloaded (others kept 1.80 of 2 cores busy (> 50%))" in out
