"""The one child-process helper: every child msbench starts dies with its parent, with its scratch dir.

A `ChildScope` owns a scratch directory and the process groups of the children it starts (each
child gets a session of its own, so `killpg` reaches MindSpore's compile workers; descendants that
made sessions of their own, like msrun's ranks (`preexec_fn=os.setsid`), are found through /proc
and killed too). Leaving the scope, normally or by an exception (SIGINT, SIGTERM, a timeout),
kills what is left and removes the directory. For the exits no `finally` sees (SIGKILL of the
parent, a segfault) each scope has a watchdog: a tiny stdlib-only process in a session of its own,
reading a pipe only the parent holds. End of file without a "done" line means the parent died: it
kills the groups, runs the cleanup commands (e.g. stopping a daemonised dataset-cache server)
and removes the paths. A pipe, not PR_SET_PDEATHSIG: the runner starts children from pool
threads, and the death signal fires when the forking *thread* exits, not the process.

A daemon a child starts (the dataset-cache server: `--start` forks it into a session of its own and
exits) is in none of our groups and, re-parented to init, no descendant of ours either. Every child a
scope starts carries the scope's random token in its environment (SCOPE_ENV), and a daemon inherits
it: a scope left by an exception, and the watchdog after its cleanup commands, kill the processes that
carry the token. Only those: a process that merely looks the same (another user's server on the same
binary) is never signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Mapping, Sequence

CLEANUP_RETRY_S = 10.0      # within the 20 s tests/msbench/test_faults.py allows the whole cleanup
SCOPE_ENV = "MSBENCH_CHILD_SCOPES"     # the tokens of the scopes a process descends from, comma-separated
_LIVE: set["ChildScope"] = set()
_LIVE_LOCK = threading.Lock()


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that every scope's cleanup runs (as KeyboardInterrupt does for
    SIGINT); a BaseException so that no `except Exception` of a cell swallows it."""


def raise_on_sigterm() -> object:
    """Install the SIGTERM handler (main thread only; the CLI does it for every verb); returns the old one."""
    def handler(signum: int, frame: object) -> None:
        raise Terminated()
    return signal.signal(signal.SIGTERM, handler)


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


class ChildScope:
    """`with ChildScope("msbench-worker-") as scope: scope.run([...])`; `scope.scratch` is its directory
    (None when `scratch_prefix` is None). `cleanup` commands run if the parent dies inside the scope, each
    retried until it exits 0 for CLEANUP_RETRY_S (a daemon the parent was starting as it died, such as a
    dataset-cache server whose process exists before it listens, refuses the first stop); then every process
    carrying the scope's token is killed (such a server still refused its stop after 10 s once, under load in
    CI, and outlived its cell)."""

    def __init__(self, scratch_prefix: str | None = None, cleanup: Sequence[Sequence[str]] = (),
                 cleanup_env: Mapping[str, str] | None = None) -> None:
        self.scratch_prefix = scratch_prefix
        self.cleanup = [list(c) for c in cleanup]
        self.token = uuid.uuid4().hex
        self.cleanup_env = dict(cleanup_env) if cleanup_env is not None else None
        self.scratch: Path | None = None
        self._groups: set[int] = set()
        self._lock = threading.Lock()
        self._pipe: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "ChildScope":
        if self.scratch_prefix is not None:
            self.scratch = Path(tempfile.mkdtemp(prefix=self.scratch_prefix))
        env = dict(self.cleanup_env if self.cleanup_env is not None else os.environ)
        env.pop(SCOPE_ENV, None)             # the watchdog and its commands carry no token: no sweep kills them
        read_end, self._pipe = os.pipe()
        spec = {"paths": [str(self.scratch)] if self.scratch else [], "commands": self.cleanup,
                "token": self.token}
        try:
            self._watchdog = subprocess.Popen([sys.executable, "-I", "-S", __file__, json.dumps(spec)],
                                              stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              env=env, start_new_session=True)
        except BaseException:
            os.close(self._pipe)
            self._pipe = None
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            os.close(read_end)
        with _LIVE_LOCK:
            _LIVE.add(self)
        return self

    def run(self, argv: Sequence[str], *, input: str = "", env: Mapping[str, str] | None = None,
            cwd: str | Path | None = None, timeout: float | None = None, capture: bool = True) -> ChildResult:
        """Run to completion in its own process group (in the scratch dir unless `cwd`); on timeout the
        whole group is killed and `timed_out` is set. `capture=False` streams its output to ours."""
        pipe = subprocess.PIPE if capture else None
        proc = self.start(argv, env=env, cwd=cwd, stdin=pipe, stdout=pipe, stderr=pipe)
        try:
            out, err = proc.communicate(input if capture else None, timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _killpg(proc.pid)
            out, err = proc.communicate()
            timed_out = True
        finally:
            if proc.poll() is None:          # interrupted while waiting (SIGINT, SIGTERM): kill it now
                _killpg(proc.pid)
        self._forget(proc.pid)
        return ChildResult(proc.returncode, out or "", err or "", timed_out)

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
              **popen: object) -> subprocess.Popen[str]:
        """Start without waiting (a server); the scope's exit kills its group."""
        env = dict(env if env is not None else os.environ)
        env[SCOPE_ENV] = ",".join(filter(None, [env.get(SCOPE_ENV), self.token]))
        proc = subprocess.Popen(list(argv), env=env,
                                cwd=str(cwd or self.scratch or os.getcwd()), text=True, start_new_session=True,
                                **popen)  # type: ignore[call-overload]
        with self._lock:
            self._groups.add(proc.pid)
        self._tell(f"pgid {proc.pid}")
        return proc

    def kill(self) -> None:
        """SIGKILL every group this scope started (already-gone groups are skipped)."""
        with self._lock:
            groups = list(self._groups)
        for pgid in groups:
            _killpg(pgid)

    def _forget(self, pgid: int) -> None:
        _killpg(pgid, tree=False)            # leftovers in a finished child's group (a grandchild it did not wait for)
        with self._lock:
            self._groups.discard(pgid)
        self._tell(f"forget {pgid}")

    def _tell(self, line: str) -> None:
        if self._pipe is not None:
            try:
                os.write(self._pipe, (line + "\n").encode())
            except OSError:
                pass                         # the watchdog is gone; the scope still cleans up itself

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self.kill()
        if kind is not None:                 # interrupted (SIGTERM, SIGINT, an error): daemons it started too
            kill_carrying(self.token)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self._tell("done")
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._watchdog is not None:
            try:
                self._watchdog.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()


def kill_live_children() -> None:
    """Kill the children of every open scope (an interrupted run unblocks the threads waiting on them)."""
    with _LIVE_LOCK:
        scopes = list(_LIVE)
    for scope in scopes:
        scope.kill()


def _killpg(pgid: int, tree: bool = True) -> None:
    """SIGKILL the group and (`tree`) every descendant of its live leader, found before the first kill (once
    the leader is gone its children are re-parented and can no longer be found)."""
    found = descendants(pgid) if tree else []
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from the parent links in /proc (Linux; nothing elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        ppid = parent_of(entry) if entry.isdigit() else None
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, its parent's parent... up to (not counting) PID 1, from /proc (Linux; nothing elsewhere)."""
    found = []
    parent = parent_of(pid)
    while parent is not None and parent > 1:
        found.append(parent)
        parent = parent_of(parent)
    return found


def parent_of(pid: int | str) -> int | None:
    """The parent PID of a live process, from /proc/PID/stat (None when gone, or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])     # after "pid (comm) state"


def _watch(spec_text: str) -> int:
    """The watchdog (run as a script, stdlib only): follow the parent's pipe; clean up unless told done."""
    spec = json.loads(spec_text)
    groups: set[int] = set()
    buffer = b""
    while True:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            word, _, arg = line.decode().partition(" ")
            if word == "done":
                return 0
            if word == "pgid":
                groups.add(int(arg))
            elif word == "forget":
                groups.discard(int(arg))
    for pgid in groups:
        _killpg(pgid)
    deadline = time.monotonic() + CLEANUP_RETRY_S
    for command in spec["commands"]:
        while True:
            try:
                done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                done = False
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    kill_carrying(spec["token"])
    for path in spec["paths"]:
        shutil.rmtree(path, ignore_errors=True)
    return 0


def kill_carrying(token: str) -> None:
    """SIGKILL every process whose environment carries the scope `token` (our descendants, daemonised or not;
    Linux /proc, nothing elsewhere). Another user's processes cannot be read unless we are root, and never
    carry the token: they are never signalled."""
    for pid in carrying(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def carrying(token: str) -> list[int]:
    """The live processes whose environment (as they were started) holds `token` in SCOPE_ENV."""
    found = []
    key = SCOPE_ENV.encode() + b"="
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else []:
        try:
            environ = entry.joinpath("environ").read_bytes()
        except OSError:
            continue
        for var in environ.split(b"\0"):
            if var.startswith(key) and token.encode() in var[len(key):].split(b","):
                if int(entry.name) != os.getpid():
                    found.append(int(entry.name))
                break
    return found


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # a Ctrl-C reaches the terminal's group; the parent decides
    sys.exit(_watch(sys.argv[1]))
