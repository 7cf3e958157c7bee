"""A Ray cluster of several nodes on loopback, started and stopped by its owner: the Ray tests' fixture
and `tools/ray_nightly_loopback.py` (the nightly over two nodes, timed and compared with a local run).

Every process a node starts is stopped with it (its process group and its descendants), never any other Ray
on this machine. Nodes and drivers run in a folder outside the checkout; the nodes' PYTHONPATH holds only
`node_path`, so a task finds the suite through the packages the driver ships (py_modules), as on a real
cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import psutil

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
RAY = Path(sys.executable).with_name("ray")
TIMING = ("started_at", "duration_s")
ACCURACY_RUN_TIMING = ("total_s", "wall_s", "cpu_s", "cached")
DRIVER_PATH = os.pathsep.join([str(ROOT), str(SUPPORT)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    proc: subprocess.Popen
    log: Path
    descendants: set[int] = field(default_factory=set)

    def remember_children(self) -> None:
        try:
            self.descendants |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass

    def kill(self, sig: int = signal.SIGKILL, grace: float = 15.0) -> None:
        """This node's processes only: its `ray start --block` group, then any descendant left over."""
        self.remember_children()
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        deadline = time.time() + grace
        for pid in self.descendants:
            try:
                child = psutil.Process(pid)
                child.wait(timeout=max(0.1, deadline - time.time()))
            except psutil.TimeoutExpired:
                child.kill()
            except psutil.NoSuchProcess:
                pass


@dataclass
class Cluster:
    address: str
    temp_dir: Path
    env: dict[str, str]                 # the nodes' (and a driver's, plus DRIVER_PATH)
    nodes: list[Node] = field(default_factory=list)

    @property
    def outside(self) -> Path:
        """Where nodes and drivers run: a folder outside the checkout."""
        path = self.temp_dir / "elsewhere"
        path.mkdir(exist_ok=True)
        return path

    def driver_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**self.env, "PYTHONPATH": DRIVER_PATH, **(extra or {})}

    def start_node(self, *args: str) -> Node:
        log = self.temp_dir / f"node{len(self.nodes)}.log"
        cmd = [str(RAY), "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
               f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}", *args]
        with open(log, "w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env, cwd=self.outside,
                                    start_new_session=True)
        node = Node(proc, log)
        self.nodes.append(node)
        return node

    def gcs_listening(self) -> bool:
        """Whether the head's GCS port accepts a connection yet: `ray.init` against a port nobody listens
        on does not fail, it waits for minutes, so no driver is started before this is true."""
        host, port = self.address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=2.0):
                return True
        except OSError:
            return False

    def alive(self, timeout: float = 120.0) -> list[dict]:
        """The alive nodes, asked by a short driver of its own (Ray reads its token settings at import,
        so every driver of this cluster is a child process with the cluster's environment)."""
        code = ("import json, sys, ray; ray.init(address=sys.argv[1], configure_logging=False, log_to_driver=False); "
                "print(json.dumps([n for n in ray.nodes() if n.get('Alive')]))")
        out = subprocess.run([sys.executable, "-c", code, self.address], env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode:
            raise ConnectionError(out.stderr[-2000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    def msbench(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        """`msbench ARGS --executor ray --address ...` as a child driver, run outside the checkout; it must succeed."""
        cmd = [sys.executable, "-m", "msbench.cli", *args, "--executor", "ray", "--address", self.address, "--quiet"]
        done = subprocess.run(cmd, env=self.driver_env(env), cwd=self.outside, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    def wait_for(self, count: int, timeout: float = 300.0) -> list[dict]:
        """Polls until `count` nodes are alive. A slow start under load (the other pytest worker compiling)
        is waited for: a driver that hangs is killed and asked again, until the deadline; a node that
        exited, or the deadline, fails with the nodes' and Ray's own logs."""
        deadline, last = time.time() + timeout, "no driver was started: the GCS port never accepted a connection"
        while True:
            if self.gcs_listening():
                try:
                    alive = self.alive(timeout=max(5.0, min(60.0, deadline - time.time())))
                    if len(alive) == count:
                        for node in self.nodes:
                            node.remember_children()
                        return alive
                    last = f"{len(alive)} nodes alive"
                except (ConnectionError, subprocess.TimeoutExpired) as err:
                    last = f"{type(err).__name__}: {str(getattr(err, 'stderr', '') or err)[-1500:]}"
            exited = [n for n in self.nodes if n.proc.poll() is not None]
            if exited or time.time() > deadline:
                why = f"{len(exited)} node(s) exited" if exited else f"not in {timeout:g} s"
                raise AssertionError(f"Ray cluster did not reach {count} alive nodes: {why}; last: {last}\n"
                                     f"{self.logs()}")
            time.sleep(1.0)

    def logs(self) -> str:
        """The tails of the nodes' own output and of Ray's GCS and raylet logs, for a failed start."""
        session = self.temp_dir / "session_latest" / "logs"
        files = [n.log for n in self.nodes] + sorted(session.glob("gcs_server.*")) + sorted(session.glob("raylet*.out"))
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-1500:]}" for f in files if f.is_file())


@contextlib.contextmanager
def loopback_cluster(workers: Sequence[Sequence[str]], head_cpus: int = 2, node_path: str = str(SUPPORT),
                     env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A head of `head_cpus` CPUs and one node per entry of `workers` (its `ray start` arguments), with a
    token of its own (not ~/.ray's); stopped, and its folder removed, on exit."""
    temp_dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))      # short: Ray's socket paths have a limit
    token = temp_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, **(env or {}), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
           "PYTHONPATH": node_path}
    env.pop("RAY_ADDRESS", None)
    port = free_port()
    c = Cluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir, env=env)
    try:
        c.start_node("--head", f"--port={port}", f"--num-cpus={head_cpus}", f"--temp-dir={temp_dir}",
                     "--include-dashboard=false", f"--ray-client-server-port={free_port()}")
        c.wait_for(1)
        for n, args in enumerate(workers, start=2):
            c.start_node(f"--address={c.address}", *args)
            c.wait_for(n)
        yield c
    finally:
        for node in reversed(c.nodes):
            node.kill(signal.SIGTERM, grace=3.0)    # a head still up after 3 s waits ~15 s more, then is killed anyway
        subprocess.run(["rm", "-rf", str(temp_dir)], check=False)


def comparable(record) -> dict:
    """A record without what depends on when and where it ran: its times, provenance and run id, and how
    long its accuracy trainings took and whether this run found them cached."""
    data = record.to_dict()
    for key in (*TIMING, "provenance", "run_id"):
        data.pop(key)
    accuracy_run = (data.get("metrics") or {}).get("extra", {}).get("accuracy_run")
    if isinstance(accuracy_run, dict):
        for key in ACCURACY_RUN_TIMING:
            accuracy_run.pop(key, None)
    return data
