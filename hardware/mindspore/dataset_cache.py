"""MindSpore's dataset cache server, started and stopped around a cell that sets `cache=true`.

The `dataset-cache` admin binary ships inside the mindspore package (`utils/bin/`; the venv's
`bin/dataset-cache` is a Python wrapper that imports all of MindSpore just to exec it, so it is
called directly, with the environment that wrapper sets). The server runs on a free port of its own (other
runs on the host may have theirs on the default 50052); the client finds it through `MS_CACHE_PORT`
(read by mindspore.dataset's CacheClient) and the session through the variable that
workloads/pipeline.py reads.

`--start` daemonises the server, so no process group of ours holds it: the server's lifetime is a
`msbench.child.ChildScope` whose cleanup command is `--stop`, run by the scope's watchdog when this
process dies without reaching `__exit__` (SIGKILL), so no server outlives its cell. Should the stop
fail, the server is killed as a carrier of the scope's token, inherited from the `--start` that forked
it: never by its binary and port, which another user's server on the host could share.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import stat
from pathlib import Path
from types import TracebackType

from msbench.child import ChildScope
from workloads.pipeline import CACHE_SESSION_ENV

PORT_ENV = "MS_CACHE_PORT"
SESSION_LINE = re.compile(r"Session created for server on port (\d+): (\d+)")


def mindspore_dir() -> Path:
    """The installed mindspore package, found without importing it."""
    spec = importlib.util.find_spec("mindspore")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("mindspore is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def cache_binary() -> Path:
    """The admin binary, made executable (with its server) as MindSpore's own cache_admin does: the
    wheel installs both without exec bits, so a fresh environment could not start them otherwise."""
    bin_dir = mindspore_dir() / "utils" / "bin"
    for name in ("dataset-cache", "dataset-cache-server"):
        path = bin_dir / name
        if not os.access(path, os.X_OK):
            path.chmod(stat.S_IRWXU)
    return bin_dir / "dataset-cache"


def admin_env() -> dict[str, str]:
    """What mindspore.dataset.engine.cache_admin sets before exec'ing the binary."""
    ms_dir = mindspore_dir()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(ms_dir / ".." / ".." / ".."),
                                                          env.get("LD_LIBRARY_PATH")]))
    env["LD_PRELOAD"] = str(ms_dir / "lib" / "libnnacl.so")
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DatasetCacheServer:
    """`with DatasetCacheServer(): ...` starts a server and a session, exports both, and stops it after."""

    def __init__(self, log_dir: Path | None = None, workers: int = 1) -> None:
        self.port = free_port()
        self.workers = workers
        self.log_dir = log_dir
        self.session: int | None = None
        self._saved: dict[str, str | None] = {}
        # the server inherits the scope's token from `--start`: the watchdog's last resort if --stop fails
        self._scope = ChildScope(cleanup=[self._argv("--stop")], cleanup_env=admin_env())

    def _argv(self, *args: str) -> list[str]:
        return [str(cache_binary()), *args, "-p", str(self.port)]

    def _admin(self, *args: str) -> str:
        env = admin_env()
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            env["GLOG_log_dir"] = str(self.log_dir)
        proc = self._scope.run(self._argv(*args), timeout=60, env=env, cwd=cache_binary().parent)
        out = proc.stdout + proc.stderr
        if proc.timed_out:
            raise RuntimeError(f"dataset-cache {' '.join(args)} timed out after 60 s: {out.strip()[-500:]}")
        if proc.returncode != 0:
            raise RuntimeError(f"dataset-cache {' '.join(args)} failed (exit {proc.returncode}): {out.strip()[-500:]}")
        return out

    def __enter__(self) -> "DatasetCacheServer":
        self._scope.__enter__()
        try:
            self._admin("--start", "-w", str(self.workers))
            match = SESSION_LINE.search(self._admin("-g"))
            if not match:
                raise RuntimeError("dataset-cache -g printed no session id")
            self.session = int(match.group(2))
        except BaseException as err:
            self._stop(type(err), err, err.__traceback__)
            raise
        for key, value in ((PORT_ENV, str(self.port)), (CACHE_SESSION_ENV, str(self.session))):
            self._saved[key] = os.environ.get(key)
            os.environ[key] = value
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._stop(kind, err, tb)

    def _stop(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._admin("--stop")     # ends the server and its sessions (it has exited when this returns)
        except BaseException as stop_err:
            kind, err, tb = type(stop_err), stop_err, stop_err.__traceback__    # the scope kills what --stop missed
            raise
        finally:
            self._scope.__exit__(kind, err, tb)
