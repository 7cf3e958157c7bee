"""msbench nightly without running asv: which commits, resumption, clone checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from msbench.cli import main
from msbench.nightly import ensure_main, plan_commits

HISTORY = ["c5", "c4", "c3", "c2", "c1"]          # newest first, as git rev-list prints it


def test_every_commit_after_the_newest_with_results_oldest_first():
    plan = plan_commits(HISTORY, done={"c2", "c1"}, since=None, max_commits=0)
    assert plan.commits == ["c3", "c4", "c5"] and plan.deferred == 0


def test_no_results_yet_means_the_tip_only():
    assert plan_commits(HISTORY, done=set(), since=None, max_commits=0).commits == ["c5"]


def test_since_backfills_and_skips_commits_with_results():
    assert plan_commits(HISTORY, done={"c4"}, since="c3", max_commits=0).commits == ["c3", "c5"]


def test_an_interrupted_night_resumes_where_it_stopped():
    # Commits run oldest first, so a killed night leaves a prefix (c3) and the next one continues.
    first = plan_commits(HISTORY, done={"c2"}, since=None, max_commits=0)
    assert first.commits == ["c3", "c4", "c5"]
    assert plan_commits(HISTORY, done={"c2", "c3"}, since=None, max_commits=0).commits == ["c4", "c5"]


def test_max_commits_defers_the_newest_to_the_next_night():
    plan = plan_commits(HISTORY, done={"c1"}, since=None, max_commits=2)
    assert plan.commits == ["c2", "c3"] and plan.deferred == 2


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def origin(tmp_path):
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "asv.conf.json").write_text("{}")
    git(repo, "add", "asv.conf.json")
    for i in range(3):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    return repo


def test_shallow_clone_fails_clearly(origin, tmp_path, monkeypatch, capsys):
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)], check=True)
    monkeypatch.chdir(clone)
    assert main(["nightly"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shallow clone" in err and "fetch-depth: 0" in err


def test_detached_ci_checkout_gets_a_local_main(origin, tmp_path):
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    git(clone, "checkout", "-q", "--detach", "HEAD~1")
    git(clone, "branch", "-D", "main")
    ensure_main(clone)
    assert git(clone, "rev-parse", "main") == git(origin, "rev-parse", "main")


def test_no_main_anywhere_is_a_clear_error(origin, tmp_path, monkeypatch, capsys):
    git(origin, "branch", "-m", "main", "trunk")
    monkeypatch.chdir(origin)
    assert main(["nightly"]) == 2
    assert "no local branch 'main' and no origin/main" in capsys.readouterr().err


def test_outside_a_repository(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["nightly"]) == 2
    assert "not inside a git repository" in capsys.readouterr().err


def test_a_second_nightly_in_the_same_checkout_refuses(origin, monkeypatch, capsys):
    import fcntl

    lock = origin / "results" / ".nightly.lock"
    lock.parent.mkdir()
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        monkeypatch.chdir(origin)
        assert main(["nightly"]) == 2
    assert "another msbench nightly is running" in capsys.readouterr().err


def test_a_missing_interpreter_is_refused_before_asv_runs(origin, monkeypatch, capsys):
    import msbench.nightly as nightly

    monkeypatch.setattr(nightly, "asv", lambda *a, **k: pytest.fail("asv ran"))
    monkeypatch.chdir(origin)
    assert main(["nightly", "--python", "/nonexistent/python"]) == 2
    assert capsys.readouterr().err == ("msbench nightly: error: --python='/nonexistent/python' is not allowed; "
                                       "allowed: a Python interpreter with MindSpore and asv_runner "
                                       "(not an executable file)\n")
    monkeypatch.setenv("MSBENCH_ASV_PYTHON", "/bin/false")
    assert main(["nightly"]) == 2
    assert capsys.readouterr().err.startswith("msbench nightly: error: $MSBENCH_ASV_PYTHON='/bin/false' is not "
                                              "allowed; allowed: a Python interpreter with MindSpore and asv_runner "
                                              "(`/bin/false -c 'import asv_runner'` failed")


@pytest.mark.parametrize("target, plugins, message", [
    ("os:system", "", "$MSBENCH_TARGET: target='os:system' is not allowed; allowed: mindspore:cpu, "),
    ("os:system", "os:system", "target='os:system' is not allowed; allowed: a target class (os:system is not one: "
                               "TypeError: system() missing required argument 'command' (pos 1))"),
])
def test_a_bad_msbench_target_is_refused_before_asv_runs(origin, monkeypatch, capsys, target, plugins, message):
    import msbench.nightly as nightly

    monkeypatch.setattr(nightly, "asv", lambda *a, **k: pytest.fail("asv ran"))
    monkeypatch.setenv("MSBENCH_TARGET", target)
    monkeypatch.setenv("MSBENCH_ALLOW_PLUGINS", plugins)
    monkeypatch.chdir(origin)
    assert main(["nightly"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"msbench nightly: error: {message}"), err
