"""`--executor ray` against a real two-node Ray cluster on loopback, started and stopped here.

The cluster (tests/support/ray_loopback.py) stops every process it started and nothing else; nodes and
drivers run outside the checkout, and a task finds the suite through the packages the driver ships.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msbench.runner import run_matrix
from msbench.store import RunStore

pytest.importorskip("ray")      # the optional extra: pip install msbench[ray]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from ray_loopback import ROOT, SUPPORT, comparable, loopback_cluster  # noqa: E402  (after the skip)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def label_of(node: dict) -> str:
    from msbench.executors.ray_cluster import node_label

    return node_label(node["NodeManagerAddress"], node["NodeID"])


@pytest.fixture(scope="module")
def cluster():
    """The head has 2 CPUs; the second node 1 CPU and `{"NPU": 8}`, standing in for an Ascend server."""
    with loopback_cluster([["--num-cpus=1", '--resources={"NPU": 8}']]) as c:
        yield c


def write_matrix(tmp_path: Path, name: str, target: str, axis: str, values: list, workloads=("resnet50",)) -> Path:
    """A matrix of tiny presets on one target, varying one knob."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\ntargets = ["{target}"]\n'
                    + "".join(f'[[workloads]]\nname = "{w}"\npreset = "tiny"\n' for w in workloads)
                    + f"[axes]\n{axis} = {json.dumps(values)}\n")
    return path


def test_smoke_on_the_device_model_matches_a_local_run_cell_by_cell(cluster, tmp_path):
    """The reported case: from outside the checkout, `--target model:ascend910b` on Ray was refused on the
    nodes (the profiles were looked for beside an unpacked `msbench`) and the driver died with 0 records.
    One graph (ResNet-50 tiny) crossed with knobs that change the host side of each prediction, so the cells'
    records differ from one another and the test compiles once."""
    matrix = tmp_path / "host.toml"
    matrix.write_text('name = "host"\ntargets = ["model:ascend910b"]\n[[workloads]]\nname = "resnet50"\n'
                      'preset = "tiny"\n[base]\nmode = "graph"\n[axes]\nmode = ["graph", "pynative"]\n'
                      'sink = [false, true]\nworkers = [1, 4]\n')
    local = run_matrix(matrix, out=tmp_path, run_id="local", progress=False)
    cluster.msbench("run", str(matrix), "--out", str(tmp_path), "--run-id", "ray")
    remote = RunStore(tmp_path / "ray.jsonl").load()
    mine = {r.cell_id: comparable(r) for r in RunStore(local.path).load()}
    theirs = {r.cell_id: comparable(r) for r in remote}
    assert len(mine) == 8 and mine == theirs
    assert len({json.dumps(m["metrics"], sort_keys=True) for m in mine.values()}) >= 4   # the knobs reach the answers
    # Ran on the cluster's nodes, not the driver. Which node runs a cell is Ray's choice: these cells take well
    # under a second, so the head may run all eight before the second node has started a worker (placement over
    # several nodes is held by the killed-node test below, whose gated cells wait for it).
    assert {r.provenance["node"] for r in remote} <= {label_of(n) for n in cluster.alive()}
    assert all(r.provenance["ray_attempts"] == 1 for r in remote)
    # The driver's threading reached the tasks (Ray would set OMP_NUM_THREADS=1 for a 1-CPU task).
    assert {r.provenance["env"].get("OMP_NUM_THREADS") for r in remote} == {os.environ["OMP_NUM_THREADS"]}


def test_an_exception_in_a_task_is_that_cells_failed_record_not_the_drivers_end(cluster, tmp_path):
    """Seed 7 raises in the task outside the target's run, an exception Ray cannot rebuild on the driver
    (it arrived there as UnserializableException and ended the run with 0 records); seeds 1 and 8 are fine."""
    path = write_matrix(tmp_path, "raises", "support_targets:RaisingOnNodeTarget", "seed", [7, 8])
    cluster.msbench("run", str(path), "--out", str(tmp_path), "--run-id", "raises",
                    "--allow-plugin", "support_targets:RaisingOnNodeTarget")
    records = {r.cell.settings.seed: r for r in RunStore(tmp_path / "raises.jsonl").load()}
    assert sorted(records) == [1, 7, 8] and records[1].status == records[8].status == "ok"
    failed = records[7]
    assert failed.status == "failed" and failed.provenance["ray_attempts"] == 1
    assert "Traceback (most recent call last)" in failed.reason and "NodeOnlyError" in failed.reason
    assert "scripted failure outside run on " in failed.reason and "supports" in failed.reason
    assert failed.provenance["node"] in {label_of(n) for n in cluster.alive()}    # recorded where it ran


@pytest.mark.long       # a further case of Ray running cells (the device-model smoke above stays in make test)
def test_smoke_on_mindspore_cpu_measures_alone_on_the_largest_node(cluster, tmp_path):
    protocol = {f"MSBENCH_MEASURE_{k}": v for k, v in {"TIME_BUDGET_S": "1", "MIN_STEPS": "3", "WARMUP_STEPS": "1",
                                                        "MAX_STEPS": "6", "MEMORY_PROFILE_STEPS": "0",
                                                        "PROCESSES": "1", "MAX_PROCESSES": "1"}.items()}
    path = write_matrix(tmp_path, "cpu", "mindspore:cpu", "amp_level", ["O0", "O2"])   # two ResNet-50 tiny cells
    cluster.msbench("run", str(path), "--out", str(tmp_path), "--run-id", "cpu",
                    env=protocol)                                    # the driver forwards them to the tasks
    records = RunStore(tmp_path / "cpu.jsonl").load()
    assert len(records) == 2
    assert all(r.status == "ok" and r.metrics.step_time_s > 0 for r in records), [(r.status, r.reason) for r in records]
    head = [label_of(n) for n in cluster.alive() if n["Resources"].get("CPU") == 2.0]
    assert {r.provenance["node"] for r in records} == set(head)     # 2 CPUs asked: only the head has them
    # MAX_STEPS reached the node: at most 6 measured steps in each of the cell's measuring processes
    assert all(len(r.metrics.step_time_stats.samples) <= 6 * len(r.metrics.step_time_stats.process_medians)
               for r in records), [(len(r.metrics.step_time_stats.samples), r.metrics.step_time_stats.process_medians)
                                   for r in records]


def test_npu_cells_go_to_the_npu_node_and_too_many_npus_are_refused(cluster, tmp_path):
    path = write_matrix(tmp_path, "npus", "mindspore:ascend", "devices", [8, 16])
    cluster.msbench("run", str(path), "--out", str(tmp_path), "--run-id", "npus", timeout=300)  # not left pending
    records = {r.cell.settings.devices: r for r in RunStore(tmp_path / "npus.jsonl").load()}
    npu_node = [label_of(n) for n in cluster.alive() if n["Resources"].get("NPU") == 8.0]
    assert records[16].status == "unsupported" and "16 NPU" in records[16].reason and "8 NPU" in records[16].reason
    assert records[16].provenance["node"] == "driver"
    # The 8-NPU cell ran on the NPU node, whose target then found no real Ascend device there.
    assert records[8].provenance["node"] in npu_node and records[8].status == "unsupported"
    assert "no Ascend" in records[8].reason


def test_a_killed_node_is_retried_then_an_interrupted_driver_resumes_every_cell_once(cluster, tmp_path):
    """Six baseline cells (run first, before any other) spread over three nodes; the third node is
    SIGKILLed under one of them, which is retried elsewhere and counted. The other cells (seed >= 20)
    are held by a gate: the driver is interrupted with them in flight, and --resume records the rest.
    Every cell ends up recorded exactly once."""
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    marks.mkdir()
    workloads = ["resnet50", "yolov5s", "yolov8n", "yolov8s", "transformer-base", "bert-base"]
    path = write_matrix(tmp_path, "faults", "support_targets:GatedTarget", "seed", [20, 21], workloads)
    total = 3 * len(workloads)
    run_file = tmp_path / "runs" / "faults.jsonl"
    cmd = [sys.executable, "-m", "msbench.cli", "run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "faults",
           "--executor", "ray", "--address", cluster.address, "--quiet", "--allow-plugin", "support_targets:GatedTarget"]
    env = cluster.driver_env({"MSBENCH_TEST_MARKS": str(marks), "MSBENCH_TEST_GATE": str(gate)})
    known = {n["NodeID"] for n in cluster.alive()}
    victim = cluster.start_node(f"--address={cluster.address}", "--num-cpus=1")
    victim_id = next(n["NodeID"] for n in cluster.wait_for(3) if n["NodeID"] not in known)

    def recorded() -> dict:
        return {r.cell_id: r for r in RunStore(run_file).load(repair=True)} if run_file.exists() else {}

    def running(where=lambda node: True, gated=False) -> list[str]:
        """Cells marked (started) on nodes `where` accepts and not yet recorded."""
        done = recorded()
        return [cell_id for seed, cell_id, node in (m.name.split(".") for m in marks.iterdir())
                if (int(seed) >= 20) == gated and where(node) and cell_id not in done]

    driver = subprocess.Popen(cmd, env=env, cwd=cluster.outside, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)

    def wait(what, check, timeout=240.0):
        deadline = time.time() + timeout
        while not (found := check()):
            assert driver.poll() is None, driver.stdout.read()
            assert time.time() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)
        return found

    try:
        lost = wait("a baseline cell on the third node", lambda: running(lambda node: node == victim_id))[0]
        victim.kill(signal.SIGKILL)
        retried = wait("the lost cell's retry", lambda: recorded().get(lost))
        assert retried.status == "ok" and retried.provenance["ray_attempts"] == 2
        assert not retried.provenance["node"].endswith(victim_id[:8])
        wait("gated cells in flight", lambda: running(gated=True))
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    partial = recorded()
    assert len(partial) == len(workloads)                  # the baselines, none of the gated cells
    # The printed line repeats what shapes the run: it resumes on the same cluster with the same plugin.
    said = driver.stdout.read()
    line = next(ln for ln in said.splitlines() if "resume with: " in ln)
    resume = shlex.split(line.split("resume with: ", 1)[1])
    for flag, value in (("--executor", "ray"), ("--address", cluster.address),
                        ("--allow-plugin", "support_targets:GatedTarget"), ("--run-id", "faults")):
        assert resume[resume.index(flag) + 1] == value, line
    assert resume[:2] == ["msbench", "run"] and "--resume" in resume
    gate.touch()
    done = subprocess.run([sys.executable, "-m", "msbench.cli", *resume[1:]], env=env, cwd=cluster.outside,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    records = RunStore(run_file).load()
    ids = [r.cell_id for r in records]
    assert len(ids) == len(set(ids)) == total
    assert all(r.status == "ok" for r in records)


@pytest.mark.long       # a further case: Ray started and stopped locally (the loopback cluster tests stay)
def test_asv_path_without_an_address_starts_and_stops_a_local_ray(tmp_path):
    """What `msbench nightly --executor ray` hands asv's setup_cache: $MSBENCH_EXECUTOR and no address,
    so benchmarks.evaluate_matrix runs the matrix on a Ray instance of its own, stopped after."""
    path = write_matrix(tmp_path, "few", "support_targets:InlineTarget", "seed", [7, 8])
    env = {**os.environ, "MSBENCH_EXECUTOR": "ray", "MSBENCH_MATRIX": str(path), "MSBENCH_TARGET": "support_targets:InlineTarget",
           "MSBENCH_ALLOW_PLUGINS": "support_targets:InlineTarget", "MSBENCH_ASV_RUNS": str(tmp_path / "runs"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    code = ("import ray, benchmarks; table = benchmarks.evaluate_matrix(); "
            "print('STILL_UP' if ray.is_initialized() else 'STOPPED', len(table))")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["STOPPED", "3"]
    records = RunStore(next((tmp_path / "runs").glob("*.jsonl"))).load()
    assert len(records) == 3 and all(r.status == "ok" and r.provenance["node"] for r in records)
