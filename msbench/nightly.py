"""`msbench nightly`: benchmark every new commit of `main` with asv, publish the HTML, write the report.

Safe from cron or CI on a full clone: it creates the local `main` branch and the asv machine entry
when they are missing, refuses a shallow clone (asv would silently drop history), and resumes: commits
run oldest first, so an interrupted night leaves results for a prefix and the next night continues
after the newest commit with results.

Environments: asv's virtualenv per asv.conf.json (MindSpore installed once, the project per commit),
or, when MSBENCH_ASV_PYTHON names an interpreter with MindSpore and asv_runner (a device host, a
test), that interpreter with each commit's source exported on ASV_PYTHONPATH.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from msbench.asv_results import result_commits
from msbench.child import ChildScope
from msbench.child_io import ISA_DEFAULT, ISA_ENV
from msbench.cli import HANDLERS, build_parser
from msbench.errors import UserError
from msbench.executors import executor_env
from msbench.gitrepo import first_parent_history, git, is_shallow, repo_root, rev_parse
from msbench.plugins import import_object
from msbench.targets import TARGET_KINDS, check_target_name, resolve_target

BRANCH = "main"
DEFAULT_TARGET = "model:ascend910b"             # benchmarks/__init__.py's
RESULTS_DIR, HTML_DIR, RUNS_DIR = Path("results/asv"), Path("results/html"), Path("results/runs")
MODEL_MACHINE = ["--os", "any", "--arch", "any", "--cpu", "msbench device model", "--num_cpu", "1", "--ram", "0"]


@dataclass(frozen=True)
class Plan:
    commits: list[str]          # oldest first
    deferred: int               # pending commits left for the next night by --max-commits
    note: str


def asv(repo: Path, *args: str, env: dict[str, str] | None = None) -> int:
    """Run asv in the repository (its output streams to ours) and return its exit code."""
    cmd = [sys.executable, "-m", "asv", *args, "--config", str(repo / "asv.conf.json")]
    print("$ " + " ".join(cmd[2:]), flush=True)
    with ChildScope() as scope:          # asv and its benchmark processes die with this one
        return scope.run(cmd, cwd=repo, env=env, capture=False).returncode


def ensure_main(repo: Path) -> None:
    """asv benchmarks the local `main` (asv.conf.json); a CI checkout is often detached without it."""
    if rev_parse(repo, f"refs/heads/{BRANCH}"):
        return
    if not rev_parse(repo, f"refs/remotes/origin/{BRANCH}"):
        raise UserError(f"no local branch {BRANCH!r} and no origin/{BRANCH}: asv benchmarks {BRANCH!r} "
                        f"(asv.conf.json branches); fetch it with `git fetch origin {BRANCH}:{BRANCH}`")
    git(repo, "branch", BRANCH, f"origin/{BRANCH}")
    print(f"created local branch {BRANCH} from origin/{BRANCH}")


def plan_commits(history: list[str], done: set[str], since: str | None, max_commits: int) -> Plan:
    """Commits to benchmark, oldest first: after the newest one with results (or from `since` on)."""
    if since:
        window, note = history[:history.index(since) + 1], f"from {since[:8]}"
    else:
        newest = next((i for i, c in enumerate(history) if c in done), None)
        if newest is None:
            window, note = history[:1], "no results yet: the tip only (use --since to backfill)"
        else:
            window, note = history[:newest], f"after {history[newest][:8]}, the newest with results"
    pending = [c for c in reversed(window) if c not in done]
    if max_commits and len(pending) > max_commits:
        return Plan(pending[:max_commits], len(pending) - max_commits, note)
    return Plan(pending, 0, note)


def export_source(repo: Path, commit: str, dest: Path) -> Path:
    """The commit's tree as plain files (git archive), for an existing interpreter to import."""
    archive = dest / f"{commit[:12]}.tar"
    git(repo, "archive", "--format=tar", "-o", str(archive), commit)
    tree = dest / commit[:12]
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def bench_commit(repo: Path, commit: str, machine: str, python: str | None, env: dict[str, str],
                 scratch: Path) -> int:
    env = {**env, "MSBENCH_COMMIT": commit}
    if python is None:
        return asv(repo, "run", "--machine", machine, "--show-stderr", "--skip-existing-commits",
                   f"{commit}^!", env=env)
    env["ASV_PYTHONPATH"] = str(export_source(repo, commit, scratch))
    return asv(repo, "run", "--machine", machine, "--show-stderr", "-E", f"existing:{python}",
               "--set-commit-hash", commit, env=env)


@contextlib.contextmanager
def exclusive(repo: Path):
    """One nightly per checkout at a time: two would install into the same asv environment at once."""
    path = repo / "results" / ".nightly.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another msbench nightly is running in {repo} (lock {path})") from None
        yield


def write_report(repo: Path, runs: Path) -> int:
    """The pandas report (msbench report) of the records the asv suite kept and of asv's results."""
    if not runs.is_dir():
        print(f"no records in {runs}: report skipped")
        return 0
    inputs = [str(runs)] + ([str(repo / RESULTS_DIR)] if (repo / RESULTS_DIR / "benchmarks.json").is_file() else [])
    args = build_parser().parse_args(["report", *inputs, "--html", str(repo / "results" / "report.html"),
                                      "--md", str(repo / "results" / "report.md")])
    handler = import_object(HANDLERS["report"])
    return int(handler(args) or 0)  # type: ignore[operator]


def check_python(python: str | None, where: str) -> None:
    """The interpreter asv's existing environment runs: found, and it imports asv_runner (asv would fail inside
    every commit's run and end with "`asv publish` failed", hiding why)."""
    if python is None:
        return
    found = shutil.which(python)
    why = "not an executable file" if found is None else None
    if found is not None:
        try:
            proc = subprocess.run([found, "-c", "import asv_runner"], capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                why = f"`{python} -c 'import asv_runner'` failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        except (OSError, subprocess.TimeoutExpired) as err:
            why = f"it does not run ({err})"
    if why:
        raise UserError(f"{where}={python!r} is not allowed; allowed: a Python interpreter with MindSpore and "
                        f"asv_runner ({why})")


def check_target(name: str) -> None:
    """$MSBENCH_TARGET as benchmarks/__init__.py will resolve it (with $MSBENCH_ALLOW_PLUGINS), before asv runs."""
    plugins = tuple(p.strip() for p in os.environ.get("MSBENCH_ALLOW_PLUGINS", "").split(",") if p.strip())
    check_target_name(name, "$MSBENCH_TARGET", plugins)
    if name.partition(":")[0] not in TARGET_KINDS:
        resolve_target(name, plugins)                  # a plugin: it must be a target class


def nightly_command(args: argparse.Namespace) -> int:
    repo = repo_root(Path.cwd())
    if not (repo / "asv.conf.json").is_file():
        raise UserError(f"{repo}: no asv.conf.json (run msbench nightly inside the msbench repository)")
    if is_shallow(repo):
        raise UserError(f"{repo} is a shallow clone: asv needs the full history (run `git fetch --unshallow`, "
                        "or check out with fetch-depth: 0)")
    executor_env(args.executor, args.address)          # refuse a bad --executor/--address before asv starts
    check_python(args.python or os.environ.get("MSBENCH_ASV_PYTHON"),
                 "--python" if args.python else "$MSBENCH_ASV_PYTHON")
    check_target(os.environ.get("MSBENCH_TARGET", DEFAULT_TARGET))
    if args.max_commits < 0:
        raise UserError(f"--max-commits={args.max_commits} is not allowed; allowed: 0 (all) or a positive count")
    with exclusive(repo):
        return run_nightly(repo, args)


def run_nightly(repo: Path, args: argparse.Namespace) -> int:
    ensure_main(repo)
    history = first_parent_history(repo, BRANCH)
    since = None
    if args.since:
        since = rev_parse(repo, args.since)
        if since not in history:
            raise UserError(f"--since={args.since!r} is not a commit on {BRANCH}'s first-parent history")
    machine = args.machine
    target = os.environ.get("MSBENCH_TARGET", DEFAULT_TARGET)
    done = result_commits(repo / RESULTS_DIR, machine)
    plan = plan_commits(history, done, since, args.max_commits)
    print(f"msbench nightly: machine {machine}, target {target}: {len(plan.commits)} commit(s) {plan.note}"
          + (f"; {plan.deferred} left for the next run (--max-commits)" if plan.deferred else ""), flush=True)

    started = time.monotonic()
    machine_opts = MODEL_MACHINE if target.startswith("model:") else []
    if asv(repo, "machine", "--yes", "--machine", machine, *machine_opts) != 0:
        raise UserError(f"`asv machine --yes --machine {machine}` failed (see its output above)")
    python = args.python or os.environ.get("MSBENCH_ASV_PYTHON")
    runs = repo / RUNS_DIR / f"asv-{machine}"
    env = {**os.environ, "MSBENCH_ASV_RUNS": str(runs), "MSBENCH_TARGET": target,
           **executor_env(args.executor, args.address)}
    env.setdefault(ISA_ENV, ISA_DEFAULT)        # asv's benchmark processes, as every child of msbench
    failed = []
    with tempfile.TemporaryDirectory(prefix="msbench-nightly-") as scratch:
        for i, commit in enumerate(plan.commits, 1):
            t0 = time.monotonic()
            rc = bench_commit(repo, commit, machine, python, env, Path(scratch))
            print(f"[{i}/{len(plan.commits)}] {commit[:8]}: asv exit {rc} in {time.monotonic() - t0:.0f} s", flush=True)
            if rc != 0:
                failed.append(commit)
    if asv(repo, "publish") != 0:
        raise UserError("`asv publish` failed (see its output above)")
    report_rc = write_report(repo, runs)
    print(f"msbench nightly: {len(plan.commits)} commit(s) in {time.monotonic() - started:.0f} s; "
          f"HTML in {repo / HTML_DIR} (view: asv preview, or python -m http.server -d {HTML_DIR})")
    if failed:
        print(f"msbench nightly: asv reported failures at {', '.join(c[:8] for c in failed)}", file=sys.stderr)
    return 1 if failed or report_rc else 0
