"""`--executor ray`: each cell a Ray task that asks for what its target needs, on any node that has it.

Resources: `mindspore:ascend` cells ask for `{"NPU": devices}` (Ray sets ASCEND_RT_VISIBLE_DEVICES
for the task), `mindspore:gpu` cells for `num_gpus=devices`, a `mindspore:cpu` cell measures time, so it
asks for every CPU of the cluster's largest node (it runs alone there, as `--jobs 1` does locally),
and the device model or any other target for one CPU. No target knows a cell's host memory before it
runs, so none is requested. A cell no alive node can hold is refused up front, never left pending.

Code and environment travel with the job: the driver's `msbench`, `hardware`, `workloads` and `matrices`
packages (so a node runs the driver's commit, also under asv; Ray unpacks each into a folder of its own,
so the suite finds its files through msbench.resources) and the driver's MSBENCH_* and threading variables.
A worker or node that dies is a retry (at most MAX_ATTEMPTS tries, counted in the record); a cell's own
crash, timeout or OOM is a record from the task, as in a local run, and is not retried; so is an exception
of the task itself (a `failed` record with its traceback), never the driver's end.

The address (`--address`, else $RAY_ADDRESS) is checked before Ray is asked: `ray.init` against a port
nobody listens on waits for minutes, so an address of no form Ray takes, or one where nothing answers
within CONNECT_TIMEOUT_S, is a one-line error.
"""

from __future__ import annotations

import functools
import os
import socket
import time
import traceback
import hardware
import msbench
import workloads
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from msbench.cell_run import failure_record
from msbench.errors import UserError
from msbench.executors.job import CellJob, Done
from msbench.matrix import Entry
from msbench.provenance import ENV_KEYS, capture_provenance
from msbench.records import Record

MAX_ATTEMPTS = 3            # tries of a cell whose worker or node died, the first one included
POLL_S = 10.0               # how often a wait re-reads the cluster (a node may have died)
DRIVER_FACTS = ("commit", "dirty", "msbench", "started")   # provenance the driver states, not the node
CONNECT_TIMEOUT_S = 10.0    # how long an address may refuse or ignore a connection (a head still starting)
ADDRESS_FORMS = "host:port (what `ray start --head` printed, e.g. 10.0.0.1:6379), ray://host:port, auto or local"


@dataclass(frozen=True)
class Need:
    """What one cell asks a node for."""

    cpus: float = 1.0
    npus: int = 0
    gpus: int = 0

    def fits(self, node: "NodeCapacity") -> bool:
        return node.cpus >= self.cpus and node.npus >= self.npus and node.gpus >= self.gpus

    def ray_options(self) -> dict[str, Any]:
        return {"num_cpus": self.cpus, "num_gpus": self.gpus, "resources": {"NPU": self.npus} if self.npus else {}}

    def __str__(self) -> str:
        parts = [f"{self.cpus:g} CPU"] + [f"{n} {kind}" for n, kind in ((self.npus, "NPU"), (self.gpus, "GPU")) if n]
        return " + ".join(parts)


@dataclass(frozen=True)
class NodeCapacity:
    """An alive node's total resources, as `ray start` declared or detected them."""

    label: str
    cpus: float
    npus: float
    gpus: float

    @classmethod
    def from_ray(cls, node: Mapping[str, Any]) -> "NodeCapacity":
        res = node.get("Resources") or {}
        return cls(label=node_label(node["NodeManagerAddress"], node["NodeID"]), cpus=res.get("CPU", 0.0),
                   npus=res.get("NPU", 0.0), gpus=res.get("GPU", 0.0))

    def __str__(self) -> str:
        return f"{self.label} ({self.cpus:g} CPU, {self.npus:g} NPU, {self.gpus:g} GPU)"


def node_label(ip: str, node_id: str) -> str:
    """`ip/short-id`: two nodes of one host (a test cluster) stay apart."""
    return f"{ip}/{node_id[:8]}"


def cell_need(cell_target: str, devices: int, nodes: Sequence[NodeCapacity]) -> Need:
    kind, _, device = cell_target.partition(":")
    if kind == "mindspore" and device == "ascend":
        return Need(npus=devices)
    if kind == "mindspore" and device == "gpu":
        return Need(gpus=devices)
    if kind == "mindspore":
        return Need(cpus=max((n.cpus for n in nodes), default=1.0))
    return Need()


def refusal(need: Need, nodes: Sequence[NodeCapacity]) -> str | None:
    """Why no alive node can hold the cell, or None."""
    if any(need.fits(n) for n in nodes):
        return None
    return (f"ray cluster: the cell needs {need} on one node and no alive node has that; nodes: "
            + ("; ".join(map(str, nodes)) or "none"))


def forwarded_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The driver's variables that change what a cell does (the cache root, MindSpore's threading and
    ISA caps, the measuring protocol), so a node runs the cell as this machine would."""
    return {k: v for k, v in environ.items() if k in ENV_KEYS or k.startswith("MSBENCH_")}


def cluster_endpoint(address: str, where: str = "--address") -> tuple[str, int] | None:
    """(host, port) that a cluster address names; None for `auto` and `local`, which Ray resolves on this
    machine at once; a UserError for anything else."""
    if address in ("auto", "local"):
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host     # [IPv6]:port
    if not sep or not host or "/" in rest or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"{where}={address!r} is not allowed; allowed: {ADDRESS_FORMS}")
    return host, int(port)


def check_reachable(address: str, where: str = "--address", timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A UserError unless something accepts a connection at the address within `timeout` (a head that is
    still starting is waited for)."""
    endpoint = cluster_endpoint(address, where)
    if endpoint is None:
        return
    deadline, last = time.monotonic() + timeout, ""
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection(endpoint, timeout=max(0.1, min(5.0, left))):
                return
        except OSError as err:
            last = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        if time.monotonic() + 0.5 >= deadline:
            raise UserError(f"{where}={address!r}: no Ray cluster answers there (last try: {last}, for "
                            f"{timeout:g} s); allowed: a running cluster's {ADDRESS_FORMS}")
        time.sleep(0.5)


def ray_errors() -> tuple[type, tuple[type, ...], type]:
    """What `ray.get` of a task may raise: (the memory monitor's kill, a lost worker or node: retried, any other
    RayError: the task raised past run_on_node or its result cannot be rebuilt here)."""
    from ray import exceptions as rex

    return (rex.OutOfMemoryError,
            (rex.WorkerCrashedError, rex.NodeDiedError, rex.LocalRayletDiedError, rex.ObjectLostError,
             rex.RaySystemError, rex.TaskUnschedulableError),
            rex.RayError)


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


@functools.lru_cache(maxsize=1)
def node_provenance() -> dict[str, Any]:
    """This node's facts (host, CPU, versions, environment), once per worker process."""
    return {k: v for k, v in capture_provenance().items() if k not in DRIVER_FACTS}


def run_on_node(job: CellJob, entry: Entry) -> Record:
    """The Ray task: run the cell here and say where it ran. An exception is the cell's `failed` record
    with the node's traceback: an exception object may not survive the trip to the driver (one whose
    class takes other arguments than its message arrives as Ray's UnserializableException)."""
    import ray

    context = ray.get_runtime_context()
    try:
        record = job(entry)
    except Exception:  # noqa: BLE001 - the cell's failure, recorded; the run goes on
        record = failure_record(entry.cell, "failed", "ray task: " + traceback.format_exc())
    record.provenance = {**node_provenance(), "node": node_label(ray.util.get_node_ip_address(), context.get_node_id())}
    return record


def on_driver(record: Record) -> Record:
    """A record the driver wrote for a cell that ran on no node (refused, or its node lost)."""
    record.provenance["node"] = "driver"
    return record


@dataclass
class Attempt:
    entry: Entry
    need: Need
    number: int = 1


class RayExecutor:
    """Connects to the cluster at `address` (or `$RAY_ADDRESS`), else starts a local Ray instance that
    `close` stops."""

    name = "ray"

    def __init__(self, address: str | None = None, max_attempts: int = MAX_ATTEMPTS) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray; install it with: pip install 'msbench[ray]'") from None
        import matrices

        self.ray, self.max_attempts = ray, max_attempts
        runtime_env = {"py_modules": [msbench, hardware, workloads, matrices], "excludes": ["__pycache__"],
                       "env_vars": forwarded_env()}
        where = "--address" if address else "RAY_ADDRESS"
        address = address or os.environ.get("RAY_ADDRESS")      # Ray's own variable (msbench nightly sets it)
        if address:
            check_reachable(address, where)
        local = {} if address else {"include_dashboard": False}
        try:
            ray.init(address=address or "local", runtime_env=runtime_env, log_to_driver=False,
                     configure_logging=False, namespace="msbench", **local)
        except ConnectionError as err:
            raise UserError(f"{where}={address!r}: no Ray cluster answers there ({one_line(err)}); allowed: "
                            f"{ADDRESS_FORMS}") from None
        self.remote = ray.remote(run_on_node)
        self.oom_error, self.lost_errors, self.task_error = ray_errors()

    def nodes(self) -> list[NodeCapacity]:
        return [NodeCapacity.from_ray(n) for n in self.ray.nodes() if n.get("Alive")]

    def submit(self, job: CellJob, attempt: Attempt) -> Any:
        cell = attempt.entry.cell
        # Ray's own retries off: this executor counts them, and a cell's exception is never retried.
        return self.remote.options(name=f"msbench {cell.id} {cell.workload}", max_retries=0, retry_exceptions=False,
                                   scheduling_strategy="SPREAD", **attempt.need.ray_options()).remote(job, attempt.entry)

    def prepare(self, entries: Sequence[Entry], job: CellJob, announce: Callable[[str], None]) -> None:
        """Nothing: each task may land on another node with its own cache, so the driver's work would not
        be the cells'."""

    def run(self, entries: Sequence[Entry], job: CellJob, done: Done) -> None:
        nodes = self.nodes()
        pending: dict[Any, Attempt] = {}
        for entry in entries:
            need = cell_need(entry.cell.target, entry.cell.settings.devices, nodes)
            why = refusal(need, nodes)
            if why:
                done(entry, on_driver(failure_record(entry.cell, "unsupported", why)))
            else:
                attempt = Attempt(entry, need)
                pending[self.submit(job, attempt)] = attempt
        try:
            while pending:
                ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                if not ready:
                    self._drop_unplaceable(pending, done)
                    continue
                attempt = pending.pop(ready[0])
                record = self._outcome(ready[0], attempt)
                if record is None:
                    attempt.number += 1
                    pending[self.submit(job, attempt)] = attempt
                else:
                    record.provenance["ray_attempts"] = attempt.number
                    done(attempt.entry, record)
        finally:
            for ref in pending:          # interrupted: the cells not recorded run again on --resume
                self.ray.cancel(ref, force=True)

    def _outcome(self, ref: Any, attempt: Attempt) -> Record | None:
        """The task's record; None to retry it (its worker or node died); a `failed` record after the
        last try; an `oom` record when Ray's memory monitor killed it (the cell's own failure)."""
        cell = attempt.entry.cell
        try:
            return self.ray.get(ref)
        except self.oom_error as err:
            return failure_record(cell, "oom", f"ray: the node's memory monitor killed the task\n{err}")
        except self.lost_errors as err:
            why = refusal(attempt.need, self.nodes())
            if attempt.number < self.max_attempts and why is None:
                return None
            lost = (f"ray: the task's worker or node died on each of {attempt.number} attempt(s)"
                    + (f" and {why}" if why else "") + f"; last error: {type(err).__name__}: {err}")
            return on_driver(failure_record(cell, "failed", lost))
        except self.task_error as err:
            return on_driver(failure_record(cell, "failed", f"ray: the task failed: {type(err).__name__}: {err}"))

    def _drop_unplaceable(self, pending: dict[Any, Attempt], done: Done) -> None:
        """Cells no alive node can hold any more (their kind of node died) are recorded, not left pending."""
        nodes = self.nodes()
        for ref, attempt in list(pending.items()):
            why = refusal(attempt.need, nodes)
            if why:
                self.ray.cancel(ref, force=True)
                del pending[ref]
                done(attempt.entry, on_driver(failure_record(attempt.entry.cell, "failed",
                                                             f"{why} (a node left the cluster)")))

    def close(self) -> None:
        self.ray.shutdown()      # a local instance stops; a cluster stays up, this job's tasks end
