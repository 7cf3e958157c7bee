"""Issue 14's fault cases: one writer per run, a full disk, killed commands and their children, bad cache
entries and locks. Each test starts what it needs (processes, a tmpfs) and removes it."""

import contextlib
import errno
import fcntl
import importlib.util
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from msbench.cli import main
from msbench.errors import UserError
from msbench.store import RunStore

SUPPORT = Path(__file__).resolve().parents[1] / "support"
ROOT = Path(__file__).resolve().parents[2]
SLOW_INLINE, SLOW_ISOLATED, INLINE = (f"support_targets:{c}" for c in
                                      ("SlowInlineTarget", "SlowScriptedTarget", "InlineTarget"))


def matrix(tmp_path, target, seeds):
    path = tmp_path / "faults.toml"
    path.write_text(textwrap.dedent(f"""
        name = "faults"
        targets = ["{target}"]
        [[workloads]]
        name = "resnet50"
        [axes]
        seed = {json.dumps(seeds)}
    """))
    return path


@pytest.fixture
def marked_env(tmp_path, monkeypatch):
    """An environment whose every descendant carries a unique marker, with a private TMPDIR for scratch dirs."""
    monkeypatch.syspath_prepend(str(SUPPORT))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "MSBENCH_TEST_MARKER": uuid.uuid4().hex, "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([str(SUPPORT), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MSBENCH_CACHE": str(tmp_path / "cache")}
    yield env
    for proc in marked(env):                 # never leave one behind, even when an assertion failed
        proc.kill()


def marked(env):
    """The live processes carrying this test's marker (a zombie has exited: it is not counted)."""
    return [proc for proc, _ in described(env)]


def described(env):
    """(process, "name cmdline") of each live process carrying the marker."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("MSBENCH_TEST_MARKER") == env["MSBENCH_TEST_MARKER"]:
                found.append((proc, " ".join([proc.name(), *proc.cmdline()])))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def assert_nothing_survives(env):
    """No process of the run (by marker) and no scratch directory remain."""
    try:
        wait_for(lambda: not marked(env), 20, "every process to die")
    except AssertionError:
        raise AssertionError(f"processes of the run survive: {[text for _, text in described(env)]}") from None
    wait_for(lambda: not list(Path(env["TMPDIR"]).iterdir()), 10,
             f"scratch dirs to go, left: {list(Path(env['TMPDIR']).iterdir())}")


def default_signals() -> None:
    """In the child before exec: SIGINT and SIGTERM at their defaults and unblocked. Twice in the full CI
    suite (never alone, nor beside three busy loops) a SIGINT sent to `msbench run` was not acted on: it ran
    to the end and exited 0. An ignored or blocked SIGINT survives exec, so a signal state an earlier test
    left in the pytest worker is the explanation that fits; the test must not depend on it."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def msbench(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "msbench.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals, **kw)


def has_worker(run: subprocess.Popen) -> bool:
    """Whether a cell's worker runs under the `msbench run` process: its own descendants, not a scan of every
    process's environment, which took seconds under load and let a 6-second run end before the signal."""
    try:
        children = psutil.Process(run.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:
            if "msbench.worker" in " ".join(child.cmdline()):
                return True
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return False


# --- one writer per run ---------------------------------------------------------------------------

@pytest.mark.slow
def test_a_second_run_on_the_same_run_id_is_refused_naming_the_holder(tmp_path, marked_env, capsys):
    path = matrix(tmp_path, SLOW_INLINE, [7, 8, 9, 10])
    runs = tmp_path / "runs"
    first = msbench(["run", str(path), "--out", str(runs), "--run-id", "same", "--quiet",
                     "--allow-plugin", SLOW_INLINE], marked_env)
    wait_for(lambda: (runs / "same.jsonl").exists(), what="the first run to open its file")
    for extra in ([], ["--resume"]):
        code = main(["run", str(path), "--out", str(runs), "--run-id", "same", "--quiet", "--allow-plugin",
                     SLOW_INLINE, *extra])
        err = capsys.readouterr().err
        assert code == 2 and f"PID {first.pid}" in err and len(err.strip().splitlines()) == 1, err
    assert first.wait(60) == 0, first.stderr.read()
    ids = [r.cell_id for r in RunStore(runs / "same.jsonl").load()]
    assert len(ids) == len(set(ids)) == 5


# --- writes: partial, disk full -------------------------------------------------------------------

def test_partial_writes_are_retried_and_enospc_keeps_the_file_whole(tmp_path, monkeypatch, capsys):
    import msbench.store as store

    monkeypatch.syspath_prepend(str(SUPPORT))
    path = matrix(tmp_path, INLINE, list(range(7, 13)))
    real_write, calls = os.write, []

    def flaky_write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))          # a short write: the rest must follow
        if len(calls) >= 4:
            real_write(fd, bytes(data[:50]))                 # half a record, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(store.os, "write", flaky_write)
    args = ["run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "full", "--quiet",
            "--allow-plugin", INLINE]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "disk full after 2 of 7 cells; records so far are intact" in err and "--resume" in err
    assert len(err.strip().splitlines()) == 1
    assert len(RunStore(tmp_path / "runs" / "full.jsonl").load()) == 2       # whole records, no fragment
    monkeypatch.setattr(store.os, "write", real_write)                       # space freed
    assert main(args + ["--resume"]) == 0
    ids = [r.cell_id for r in RunStore(tmp_path / "runs" / "full.jsonl").load()]
    assert len(ids) == len(set(ids)) == 7


@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_tmpfs_stops_the_run_with_intact_records(tmp_path, small_tmpfs, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(SUPPORT))
    path = matrix(tmp_path, INLINE, list(range(7, 107)))
    code = main(["run", str(path), "--out", str(small_tmpfs), "--run-id", "full", "--quiet", "--allow-plugin", INLINE])
    err = capsys.readouterr().err
    assert code == 2 and "disk full after " in err and "of 101 cells; records so far are intact" in err, err
    saved = int(err.split("disk full after ")[1].split()[0])
    records = RunStore(small_tmpfs / "full.jsonl").load()                    # parses: no cut record
    assert 0 < saved == len(records) < 101


def test_a_full_disk_for_the_cache_is_one_line(tmp_path, monkeypatch):
    from msbench import cache

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))

    def no_space(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(UserError, match="disk full"):
        cache.cache_put("demo", "k", {"a": 1})
    assert not list((tmp_path / "demo").glob(".*tmp"))


# --- cache entries and locks ----------------------------------------------------------------------

@pytest.mark.parametrize("junk", [b"{}", b"[]", b"\x00\xff\xfe binary", b'{"seconds": -1, "bytes": 3}', b"nul"])
def test_a_malformed_cache_entry_is_recomputed(tmp_path, monkeypatch, junk):
    """An entry that does not match its kind's schema is a miss, computed again and replaced (the host cost,
    once a cache entry, is now a calibration file whose bad values are refused: tests/hardware/test_host_cost.py)."""
    from msbench.cache import cache_dir, cache_get, cached

    def valid(entry):                               # a kind's schema: finite costs > 0
        return all(isinstance(entry[n], (int, float)) and math.isfinite(entry[n]) and entry[n] > 0
                   for n in ("seconds", "bytes"))

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    good = {"seconds": 0.002, "bytes": 3072}
    (cache_dir("demo") / "k.json").write_bytes(junk)
    assert cache_get("demo", "k", valid) is None
    entry, hit = cached("demo", "k", lambda: good, validate=valid)
    assert (entry, hit) == (good, False)
    assert cache_get("demo", "k", valid) == good                  # replaced on disk
    assert not valid({**good, "seconds": float("nan")})


@pytest.mark.parametrize("junk", [b"{}", b"[]", b'{"ops": 3}', b"\xff"])
def test_a_wrong_shaped_opgraph_entry_is_a_miss(tmp_path, monkeypatch, junk):
    from hardware.model.graph import CACHE_KIND
    from hardware.model.opgraph import OpGraph
    from msbench.cache import cache_dir, cache_get

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    (cache_dir(CACHE_KIND) / "g.json").write_bytes(junk)
    assert cache_get(CACHE_KIND, "g", OpGraph.from_dict) is None            # the validator graph.py passes


def hold_lock(lock, foreign):
    """A process holding an exclusive flock on `lock`, and its PID: our child, or (`foreign`) an orphan that
    is neither our descendant nor our ancestor (its parent exited), as another user's run would be."""
    hold = f"import fcntl, os, time; f = open({str(lock)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX); " \
           "print(os.getpid(), flush=True); time.sleep(60)"
    argv = [sys.executable, "-c", hold]
    if foreign:
        argv = [sys.executable, "-c", f"import subprocess; subprocess.Popen({argv!r}, start_new_session=True)"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    holder = int(proc.stdout.readline())
    if foreign:
        proc.wait(timeout=30)      # the go-between's exit orphans the holder; a loaded machine may not have run it yet
    return proc, holder


def test_a_lock_wait_says_who_holds_it_and_ends(tmp_path, capsys):
    from msbench.cache import file_lock

    lock = tmp_path / ".k.lock"
    proc, holder = hold_lock(lock, foreign=True)
    try:
        assert holder not in [c.pid for c in psutil.Process().children(recursive=True)]
        started = time.time()
        with pytest.raises(UserError, match=f"timed out after 0.5 s waiting for the lock on .* held by PID {holder}"):
            with file_lock(lock, timeout=0.5):
                pass
        assert time.time() - started < 5
        assert f"waiting for the lock on {lock} held by PID {holder}" in capsys.readouterr().err
    finally:
        os.kill(holder, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not psutil.pid_exists(holder) or psutil.Process(holder).status() == psutil.STATUS_ZOMBIE)
    with file_lock(lock, fcntl.LOCK_EX, timeout=1):                          # released by the kernel
        pass


def test_a_lock_held_by_our_own_child_is_waited_for_without_a_message(tmp_path, capsys):
    """A run waiting on its own compile child (the host turnstile) is not 'held by another process'."""
    from msbench.cache import file_lock

    lock = tmp_path / ".host.turnstile"
    proc, holder = hold_lock(lock, foreign=False)
    try:
        with pytest.raises(UserError, match=f"timed out after 0.5 s waiting for the lock on .* held by PID {holder}"):
            with file_lock(lock, timeout=0.5):
                pass
        assert "waiting for the lock" not in capsys.readouterr().err
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_path_that_is_a_directory_is_one_line(tmp_path, monkeypatch):
    from msbench.cache import cached

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / ".k.lock").mkdir()
    with pytest.raises(UserError, match="lock file .*k.lock is a directory"):
        cached("demo", "k", lambda: {"v": 1})


# --- killed commands and their children -----------------------------------------------------------

def test_a_scope_kills_descendants_in_sessions_of_their_own_when_its_parent_dies(tmp_path, marked_env):
    """msrun starts its ranks with `preexec_fn=os.setsid`: killing msrun's group alone would orphan them."""
    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from msbench.child import ChildScope
        grandchild = "import os, subprocess, time; subprocess.Popen(['sleep', '300'], preexec_fn=os.setsid); time.sleep(300)"
        with ChildScope("scope-") as scope:
            scope.start([sys.executable, "-c", grandchild])
            print("started", flush=True)
            time.sleep(300)
    """))
    proc = subprocess.Popen([sys.executable, str(parent)], env=marked_env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    wait_for(lambda: any(text.startswith("sleep") for _, text in described(marked_env)), what="the grandchild")
    proc.kill()
    proc.wait()
    assert_nothing_survives(marked_env)


@pytest.mark.slow
def test_a_cleanup_command_is_retried_until_the_daemon_it_stops_listens(tmp_path, marked_env):
    """A dataset-cache server's process exists before it accepts `--stop`: the parent killed while starting
    it must not leave it running. Here a daemon in a session of its own 'listens' (creates its file) 1.5 s
    after it starts, and the stop command fails until then."""
    ready, stopped = tmp_path / "listening", tmp_path / "stopped"
    stop = f"test -e {ready} && touch {stopped}"
    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from msbench.child import ChildScope
        with ChildScope(cleanup=[["sh", "-c", {stop!r}]]):
            subprocess.Popen(["sh", "-c", "sleep 1.5; touch {ready}"], start_new_session=True)
            print("starting", flush=True)
            time.sleep(300)
    """))
    proc = subprocess.Popen([sys.executable, str(parent)], env=marked_env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "starting"
    proc.kill()
    proc.wait()
    wait_for(stopped.exists, 15, "the retried stop to succeed")
    assert_nothing_survives(marked_env)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_daemon_that_never_accepts_its_stop_is_killed_and_a_lookalike_is_not(tmp_path, marked_env, sig):
    """The last resort: a dataset-cache server refused `--stop` for the whole retry window once (CI, under
    load) and outlived its cell. Here the stop always fails and the daemon left our tree (its parent exited,
    it has a session of its own); it dies because it carries the scope's token. A process with the same argv
    that the scope did not start (another user's server on the same binary and port) is not signalled."""
    word = f"msbench-test-daemon-{tmp_path.name}"
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)", word]
    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from msbench.child import ChildScope, raise_on_sigterm
        raise_on_sigterm()
        with ChildScope(cleanup=[["false"]]) as scope:
            scope.start([sys.executable, "-c", "import subprocess; subprocess.Popen({sleeper!r}, start_new_session=True)"])
            print("started", flush=True)
            time.sleep(300)
    """))
    lookalike = subprocess.Popen(sleeper, env=marked_env, start_new_session=True)
    proc = subprocess.Popen([sys.executable, str(parent)], env=marked_env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    with_word = lambda: sorted(p.pid for p, text in described(marked_env) if word in text)  # noqa: E731
    wait_for(lambda: len(with_word()) == 2, what="the daemon")
    proc.send_signal(sig)
    proc.wait()
    wait_for(lambda: with_word() == [lookalike.pid], 20, "the daemon to die")
    time.sleep(0.5)
    assert lookalike.poll() is None, "the lookalike was signalled"
    lookalike.kill()
    lookalike.wait()
    assert_nothing_survives(marked_env)


@pytest.mark.slow
@pytest.mark.parametrize("sig, jobs, code", [(signal.SIGTERM, "1", 143), (signal.SIGINT, "2", 130)])
def test_sigterm_or_sigint_of_run_saves_kills_and_says_how_to_resume(tmp_path, marked_env, sig, jobs, code):
    path = matrix(tmp_path, SLOW_ISOLATED, [7, 8, 9])
    runs = tmp_path / "runs"
    proc = msbench(["run", str(path), "--out", str(runs), "--run-id", "r", "--quiet", "--jobs", jobs,
                    "--allow-plugin", SLOW_ISOLATED], marked_env)
    wait_for(lambda: has_worker(proc), what="a worker to start")
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    line = err.strip().splitlines()[-1]
    assert "interrupted: saved " in line and " of 4 cells in " in line and "resume with: msbench run" in line
    assert_nothing_survives(marked_env)
    resume = shlex.split(line.split("resume with: ")[1])
    assert resume[:2] == ["msbench", "run"] and "--resume" in resume and "r" in resume
    done = subprocess.run([sys.executable, "-m", "msbench.cli", *resume[1:], "--jobs", "2"], env=marked_env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ids = [r.cell_id for r in RunStore(runs / "r.jsonl").load()]
    assert len(ids) == len(set(ids)) == 4


@pytest.mark.slow
def test_sigkill_of_run_leaves_no_worker_and_no_scratch(tmp_path, marked_env):
    path = matrix(tmp_path, SLOW_ISOLATED, [7, 8, 9])
    proc = msbench(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet", "--jobs", "2",
                    "--allow-plugin", SLOW_ISOLATED], marked_env)
    wait_for(lambda: has_worker(proc), what="a worker to start")
    proc.kill()
    proc.wait(30)
    assert_nothing_survives(marked_env)


@pytest.mark.slow
def test_a_timed_out_cell_leaves_no_scratch(tmp_path, marked_env, capsys):
    path = matrix(tmp_path, "support_targets:ScriptedTarget", [3])        # seed 3 hangs
    proc = msbench(["run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "t", "--quiet", "--timeout", "4",
                    "--allow-plugin", "support_targets:ScriptedTarget"], marked_env)
    assert proc.wait(60) == 0, proc.stderr.read()
    assert {r.status for r in RunStore(tmp_path / "runs" / "t.jsonl").load()} == {"ok", "timeout"}
    assert_nothing_survives(marked_env)


@pytest.mark.slow
# SIGTERM's unwinding is covered by the interrupted-run tests above; the long tier adds it here
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, marks=pytest.mark.long), signal.SIGKILL])
def test_killing_run_stops_graph_extraction_and_removes_its_scratch(tmp_path, marked_env, sig):
    """The reported case: a killed `msbench run` on the device model let the extraction child finish."""
    path = tmp_path / "model.toml"
    path.write_text('name = "cold"\ntargets = ["model:ascend910b"]\n[[workloads]]\nname = "resnet50"\n'
                    '[axes]\namp_level = ["O0", "O2"]\n')
    kill_once_started(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"], marked_env,  # a cold cache
                      "hardware.model.extract", sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_measure_stops_its_worker_and_dataset_cache_server(tmp_path, marked_env, sig):
    """The reported case: `measure` with cache=true kept measuring, with its cache server, for 40 s."""
    kill_once_started(["measure", "resnet50", "--set", "data_format=mindrecord", "--set", "cache=true"], marked_env,
                      "dataset-cache-server", sig)


def test_a_killed_dataset_cache_servers_lookalike_is_not_signalled(tmp_path, marked_env):
    """The watchdog used to kill every process whose argv held the server binary and port, like `pkill -f`:
    as root, another user's server. A process with exactly that argv, not started by us, must survive."""
    if importlib.util.find_spec("mindspore") is None:
        pytest.skip("mindspore is not installed")
    from hardware.mindspore.dataset_cache import cache_binary

    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from hardware.mindspore.dataset_cache import DatasetCacheServer
        with DatasetCacheServer() as server:
            print(server.port, flush=True)
            time.sleep(300)
    """))
    proc = subprocess.Popen([sys.executable, str(parent)], env=marked_env, stdout=subprocess.PIPE, text=True)
    port = proc.stdout.readline().strip()
    assert port.isdigit(), "the server did not start"
    server = str(cache_binary().with_name("dataset-cache-server"))
    lookalike = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", server, port],
                                 env=marked_env, start_new_session=True)
    def servers():
        """The processes whose argv holds the server binary and the port (what the old watchdog killed)."""
        found = []
        for proc, _ in described(marked_env):
            with contextlib.suppress(psutil.Error):
                if {server, port} <= set(proc.cmdline()):
                    found.append(proc.pid)
        return sorted(found)

    real = [pid for pid in wait_for(lambda: len(servers()) == 2 and servers(), what="the server and its lookalike")
            if pid != lookalike.pid]
    proc.kill()
    proc.wait()
    wait_for(lambda: real[0] not in servers(), 20, "the server to stop")
    time.sleep(0.5)
    assert lookalike.poll() is None, "the lookalike was signalled"
    lookalike.kill()
    lookalike.wait()
    assert_nothing_survives(marked_env)


@pytest.mark.slow
def test_killing_measure_stops_msrun_and_its_ranks(tmp_path, marked_env):
    """msrun gives each rank a session of its own: they must die with the measure that started msrun."""
    kill_once_started(["measure", "resnet50", "--set", "devices=2"], marked_env, "distributed.py", signal.SIGKILL,
                      count=3)                                            # msrun and its two ranks


def kill_once_started(args, env, child, sig, count=1):
    """Start `msbench ARGS`, send `sig` once `count` processes matching `child` run, and check nothing survives."""
    proc = msbench(args, env)
    wait_for(lambda: sum(child in text for _, text in described(env)) >= count, 120, f"{child} to start")
    proc.send_signal(sig)
    proc.wait(60)
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 143)
    assert_nothing_survives(env)
