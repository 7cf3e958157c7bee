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


def test_the_resume_line_repeats_every_option_that_shapes_the_run(monkeypatch):
    import shlex

    from msbench.cli import build_parser
    from msbench.runner import resume_command

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("MSBENCH_EXECUTOR", raising=False)
    given = ["run", "m.toml", "--target", "model:ascend910b", "--out", "o", "--run-id", "r", "--shard", "2/3",
             "--timeout", "60", "--set", "batch_size=8", "--set", "amp_level=O2", "--allow-plugin", "a:B",
             "--max-cells", "9", "--executor", "ray", "--address", "10.0.0.1:6379", "--trace-dir", "t",
             "--wait-quiet", "5", "--quiet"]
    parser = build_parser()
    args = parser.parse_args(given)
    line = resume_command(args, Path("o/r.jsonl"))
    again = parser.parse_args(shlex.split(line)[1:])
    assert again.resume and not args.resume
    shaping = {k: v for k, v in vars(args).items() if k not in ("resume", "quiet")}
    assert {k: v for k, v in vars(again).items() if k in shaping} == shaping
    # an executor and cluster chosen by the environment are written out, so the line runs anywhere
    monkeypatch.setenv("MSBENCH_EXECUTOR", "ray")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    words = shlex.split(resume_command(parser.parse_args(["run", "m.toml"]), Path("results/runs/x.jsonl")))
    assert words[words.index("--executor") + 1] == "ray" and words[words.index("--address") + 1] == "10.0.0.2:6379"
