"""What a cell asks a Ray cluster for, and when it is refused: pure functions, no cluster needed."""

from pathlib import Path

import pytest

from msbench.errors import UserError
from msbench.executors import executor_env, executor_name
from msbench.executors.ray_cluster import Need, NodeCapacity, cell_need, forwarded_env, refusal

HEAD = NodeCapacity(label="10.0.0.1/aaaaaaaa", cpus=16, npus=0, gpus=0)
ASCEND = NodeCapacity(label="10.0.0.2/bbbbbbbb", cpus=192, npus=8, gpus=0)


@pytest.mark.parametrize("target, devices, need", [
    ("mindspore:ascend", 8, Need(npus=8)),
    ("mindspore:gpu", 2, Need(gpus=2)),
    ("mindspore:cpu", 1, Need(cpus=192)),           # measures: the whole of the largest node
    ("model:ascend910b", 8, Need()),                # the device model: one CPU, whatever it predicts
    ("support_targets:InlineTarget", 1, Need()),
])
def test_each_target_asks_for_what_it_uses(target, devices, need):
    assert cell_need(target, devices, [HEAD, ASCEND]) == need


def test_a_cell_no_node_can_hold_is_refused_with_the_nodes_seen():
    assert refusal(Need(npus=8), [HEAD, ASCEND]) is None
    why = refusal(Need(npus=16), [HEAD, ASCEND])
    assert why.startswith("ray cluster: the cell needs 1 CPU + 16 NPU on one node")
    assert "10.0.0.2/bbbbbbbb (192 CPU, 8 NPU, 0 GPU)" in why
    assert "nodes: none" in refusal(Need(), [])
    assert Need(cpus=1, gpus=2).ray_options() == {"num_cpus": 1, "num_gpus": 2, "resources": {}}


def test_the_driver_forwards_what_changes_a_cell_and_nothing_else():
    env = {"MSBENCH_CACHE": "/shared/c", "MSBENCH_MEASURE_MAX_STEPS": "6", "OMP_NUM_THREADS": "2",
           "ONEDNN_MAX_CPU_ISA": "AVX2", "HOME": "/root", "PATH": "/bin", "RAY_ADDRESS": "x:1"}
    assert forwarded_env(env) == {"MSBENCH_CACHE": "/shared/c", "MSBENCH_MEASURE_MAX_STEPS": "6",
                                  "OMP_NUM_THREADS": "2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def test_executor_choice_and_its_environment(monkeypatch):
    monkeypatch.delenv("MSBENCH_EXECUTOR", raising=False)
    assert executor_name(None) == "local" and executor_name("ray") == "ray"
    monkeypatch.setenv("MSBENCH_EXECUTOR", "ray")
    assert executor_name(None) == "ray"
    assert executor_env("ray", "10.0.0.1:6379") == {"MSBENCH_EXECUTOR": "ray", "RAY_ADDRESS": "10.0.0.1:6379"}
    assert executor_env("local", None) == {"MSBENCH_EXECUTOR": "local"}
    with pytest.raises(UserError, match="--address='h:1' is not allowed with --executor local"):
        executor_env("local", "h:1")
    with pytest.raises(UserError, match="--executor='dask' is not allowed; allowed: local, ray"):
        executor_name("dask")


def test_bad_executor_options_are_one_line_errors(tmp_path, capsys, monkeypatch):
    from msbench.cli import main

    matrix = str(Path(__file__).resolve().parents[2] / "matrices/smoke.toml")
    monkeypatch.delenv("MSBENCH_EXECUTOR", raising=False)
    assert main(["run", matrix, "--address", "127.0.0.1:1", "--out", str(tmp_path)]) == 2
    assert "--address='127.0.0.1:1' is not allowed with --executor local" in capsys.readouterr().err
    assert main(["run", matrix, "--executor", "ray", "--jobs", "2", "--out", str(tmp_path)]) == 2
    assert "--jobs=2 is not allowed with --executor ray" in capsys.readouterr().err
    monkeypatch.setenv("MSBENCH_EXECUTOR", "slurm")
    assert main(["run", matrix, "--out", str(tmp_path)]) == 2
    assert "MSBENCH_EXECUTOR='slurm' is not allowed; allowed: local, ray" in capsys.readouterr().err


@pytest.mark.parametrize("address, endpoint", [
    ("10.0.0.1:6379", ("10.0.0.1", 6379)), ("ray://head.example:10001", ("head.example", 10001)),
    ("[::1]:6379", ("::1", 6379)), ("auto", None), ("local", None)])
def test_the_address_forms_ray_takes(address, endpoint):
    from msbench.executors.ray_cluster import cluster_endpoint

    assert cluster_endpoint(address) == endpoint


@pytest.mark.parametrize("address", ["nonsense", "10.0.0.1", "10.0.0.1:", ":6379", "h:0", "h:70000", "h:port",
                                     "http://h:1/x"])
def test_a_malformed_address_is_refused_with_the_forms_allowed(address):
    from msbench.executors.ray_cluster import cluster_endpoint

    with pytest.raises(UserError, match=r"RAY_ADDRESS=.* is not allowed; allowed: host:port .*ray://host:port"):
        cluster_endpoint(address, "RAY_ADDRESS")


@pytest.mark.parametrize("where, args, env", [
    ("--address='127.0.0.1:1': no Ray cluster answers there", ["--address", "127.0.0.1:1"], {}),
    ("RAY_ADDRESS='nonsense' is not allowed; allowed: host:port", [], {"RAY_ADDRESS": "nonsense"})])
def test_an_unreachable_or_malformed_address_is_one_line_and_exit_2_in_bounded_time(tmp_path, where, args, env):
    """`ray.init` against a port nobody listens on waits for minutes, and a malformed $RAY_ADDRESS ended
    in a traceback: both are one line, exit 2, run from outside the checkout."""
    import os
    import subprocess
    import sys
    import time

    pytest.importorskip("ray")
    from msbench.resources import suite_path

    environ = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MSBENCH_EXECUTOR")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "msbench.cli", "run", str(suite_path("matrices/smoke.toml")),
                           "--executor", "ray", "--out", str(tmp_path / "runs"), "--quiet", *args],
                          env={**environ, **env}, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith(f"msbench run: error: {where}") and done.stderr.count("\n") == 1, done.stderr
    assert elapsed < 30, elapsed
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())    # nothing was written



def test_a_task_error_the_driver_cannot_read_is_that_cells_failed_record():
    """The second guard: what run_on_node could not catch (or a result the driver cannot rebuild) reaches
    `ray.get` as a RayError: it is the cell's `failed` record, never the driver's end."""
    rex = pytest.importorskip("ray.exceptions")
    from msbench.cell import Cell
    from msbench.executors.ray_cluster import Attempt, RayExecutor, ray_errors
    from msbench.matrix import Entry
    from msbench.settings import make_settings

    class NoCluster:
        def get(self, ref):
            raise rex.UnserializableException("Traceback (most recent call last):\n  NodeOnlyError: on a node")

    executor = RayExecutor.__new__(RayExecutor)
    executor.ray = NoCluster()
    executor.oom_error, executor.lost_errors, executor.task_error = ray_errors()
    cell = Cell(workload="resnet50", preset="tiny", overrides={}, settings=make_settings({}), target="model:ascend910b")
    record = executor._outcome("ref", Attempt(Entry(cell=cell, status="ok"), Need()))
    assert record.status == "failed" and record.provenance["node"] == "driver"
    assert "UnserializableException" in record.reason and "NodeOnlyError: on a node" in record.reason
