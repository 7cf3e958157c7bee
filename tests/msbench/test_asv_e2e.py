"""End to end: a two-commit repository, the asv suite run on both by `msbench nightly` with the
device model, then `msbench compare` and asv's HTML. asv runs for real, with this interpreter as its
`existing` environment and each commit's source on ASV_PYTHONPATH; its machine file and results stay
in tmp. The second commit widens the tiny ResNet-50 (16 -> 64 channels): on the CPU profile with 8
data workers that moves the cell from data-bound to compute-bound, so throughput must fall and
peak memory rise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from msbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
COPIED = ["msbench", "workloads", "hardware", "benchmarks", "matrices", "tests/matrices", "asv.conf.json",
          "pyproject.toml"]
MATRIX = "tests/matrices/asv_resnet_tiny_cpu.toml"
TARGET = "model:cpu"
MACHINE = "e2e-box"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def make_repo(path: Path) -> list[str]:
    """This checkout's packages and suite, committed; then a commit that widens the tiny ResNet."""
    for name in COPIED:
        src, dst = ROOT / name, path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "suite")
    presets = path / "workloads" / "resnet50" / "presets.toml"
    text = presets.read_text()
    tiny = text.index("[resnet50.tiny]")
    width = text.index("width = 16", tiny)
    presets.write_text(text[:width] + "width = 64" + text[width + len("width = 16"):])
    git(path, "commit", "-q", "-am", "resnet50 tiny: widen to 64 channels")
    return git(path, "rev-list", "--reverse", "HEAD").split()


def nightly(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "MSBENCH_ASV_PYTHON": sys.executable, "MSBENCH_MATRIX": MATRIX,
           "MSBENCH_TARGET": TARGET, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return subprocess.run([sys.executable, "-m", "msbench.cli", "nightly", "--machine", MACHINE, *args],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def benchmarked_repo(tmp_path: Path) -> tuple[Path, Path, str, str, subprocess.CompletedProcess]:
    """(repo, home, first, second, run): the two-commit repository with `msbench nightly` run over both."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    first, second = make_repo(repo)
    run = nightly(repo, home, "--since", first)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return repo, home, first, second, run


@pytest.fixture
def suite(monkeypatch):
    """The asv suite package (benchmarks/), imported as asv does: from the working tree."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("MSBENCH_TARGET", raising=False)
    import benchmarks

    return benchmarks


def test_params_are_the_cells_of_the_matrix(suite, monkeypatch):
    monkeypatch.setenv("MSBENCH_MATRIX", MATRIX)
    assert suite.matrix_params() == [["resnet50"], ["base", "sink=true"], ["model:ascend910b"]]
    monkeypatch.setenv("MSBENCH_TARGET", TARGET)
    assert suite.matrix_params()[2] == [TARGET]
    monkeypatch.delenv("MSBENCH_MATRIX")
    params = suite.matrix_params()                                      # matrices/nightly.toml
    assert len(params) == len(suite.PARAM_NAMES) and params[1][0] == "base" and len(params[0]) >= 3


def test_cell_rows_skip_what_is_not_a_measurement_and_fail_what_broke(suite):
    ok = {"status": "ok", "reason": "", "throughput": 10.0, "accuracy_delta": None}
    table = {("w", "base", "t"): ok, ("w", "oom", "t"): {**ok, "status": "oom", "reason": "too big"},
             ("w", "crash", "t"): {**ok, "status": "failed", "reason": "Traceback: boom"}}
    assert suite.cell_metrics(table, "w", "base", "t", ("throughput",)) is ok
    with pytest.raises(NotImplementedError, match="oom: too big"):
        suite.cell_metrics(table, "w", "oom", "t", ("throughput",))
    with pytest.raises(NotImplementedError, match="not a cell"):
        suite.cell_metrics(table, "w", "other", "t", ("throughput",))
    with pytest.raises(NotImplementedError, match="no accuracy_delta"):
        suite.cell_metrics(table, "w", "base", "t", ("accuracy_delta",))
    with pytest.raises(RuntimeError, match="boom"):
        suite.cell_metrics(table, "w", "crash", "t", ("throughput",))


@pytest.mark.slow
def test_nightly_compare_and_html_over_two_commits(tmp_path, monkeypatch, capsys):
    repo, home, first, second, run = benchmarked_repo(tmp_path)
    assert "2 commit(s) from" in run.stdout
    assert (home / ".asv-machine.json").is_file()
    assert {p.name[:8] for p in (repo / "results/asv" / MACHINE).glob("*-existing-*.json")} == {first[:8], second[:8]}

    monkeypatch.chdir(repo)
    code = main(["compare", first, second, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["regressions"] > 0
    rows = {(r["variant"], r["metric"]): r for r in data["rows"]}
    throughput, memory = rows[("base", "throughput")], rows[("base", "peak_memory")]
    assert throughput["after"] < throughput["before"] and throughput["flag"] == "regression"
    assert memory["after"] > memory["before"] and memory["flag"] == "regression"
    assert rows[("base", "seconds_per_sample")]["direction"] == "worse"
    assert ("sink=true", "throughput") not in rows                      # unsupported on a CPU: skipped

    html = repo / "results" / "html"
    index = json.loads((html / "index.json").read_text())
    assert {first, second} <= set(index["revision_to_hash"].values())
    graphs = list(html.glob(f"graphs/**/machine-{MACHINE}/**/matrix_cells.Performance.track_throughput.json"))
    assert len(graphs) == 1
    points = json.loads(graphs[0].read_text())
    assert len(points) == 2                                             # one point per commit
    base = [values[0] for _, values in points]                         # variant "base" comes first
    assert base == [throughput["before"], throughput["after"]]
    assert (repo / "results" / "report.html").is_file()

    # The next night benchmarks only what is new since the newest commit with results.
    (repo / "NOTES.md").write_text("docs only\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "docs")
    run = nightly(repo, home)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"1 commit(s) after {second[:8]}" in run.stdout
    assert len(list((repo / "results/asv" / MACHINE).glob("*-existing-*.json"))) == 3
