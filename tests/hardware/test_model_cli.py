"""`msbench predict` and `msbench list hardware`: one canonical JSON object, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from msbench.cli import main

KEYS = {"step_time_s", "throughput", "throughput_per_device", "peak_memory_bytes", "memory_capacity_bytes",
        "oom", "bound", "breakdown", "mfu"}


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    """A private cache, warmed by the first prediction, shared by the subprocesses of this module."""
    cache = tmp_path_factory.mktemp("cli-cache")
    env = {**os.environ, "MSBENCH_CACHE": str(cache), "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return env, cache


def predict_json(env, cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msbench.cli", "predict", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_predict_json_is_byte_identical_across_processes_and_threads(cli_env):
    env, cache = cli_env
    args = ("resnet50", "--preset", "tiny", "--hardware", "ascend910b", "--set", "mode=graph", "--set", "devices=8", "--json")
    first = predict_json(env, cache, *args)
    assert first.returncode == 0, first.stderr
    again = predict_json({**env, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "7"}, cache, *args)
    assert again.stdout == first.stdout
    data = json.loads(first.stdout)
    assert KEYS <= set(data) and data["hardware"] == "ascend910b" and data["settings"]["devices"] == 8
    assert data["throughput"] == pytest.approx(8 * data["throughput_per_device"], rel=1e-5)
    assert first.stdout.count("\n") == 1                      # one JSON object on one line


def test_unknown_profile_is_a_one_line_error(capsys):
    assert main(["predict", "resnet50", "--hardware", "ascend999", "--json"]) == 2
    err = capsys.readouterr().err
    assert "hardware='ascend999'" in err and "ascend910b" in err and err.count("\n") == 1


def test_unknown_knob_is_a_one_line_error(capsys):
    assert main(["predict", "resnet50", "--hardware", "cpu", "--set", "turbo=1"]) == 2
    assert "turbo" in capsys.readouterr().err


def test_unknown_workload_is_a_one_line_error(capsys):
    assert main(["predict", "resnet5", "--hardware", "cpu"]) == 2
    assert "resnet5" in capsys.readouterr().err


def test_list_hardware(capsys):
    assert main(["list", "hardware", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"ascend910a", "ascend910b", "ascend910b4", "atlas300i-duo", "cpu"} <= {r["name"] for r in rows}


def test_npu_profiles_default_to_the_full_preset_and_cpu_to_tiny():
    from hardware.model.profile import default_preset, load_profile, profile_names
    from msbench.cli import build_parser

    assert build_parser().parse_args(["predict", "resnet50"]).preset is None    # resolved per profile
    assert build_parser().parse_args(["predict", "resnet50", "--preset", "tiny"]).preset == "tiny"
    for name in profile_names():
        expected = "tiny" if name in ("cpu", "cpu-xeon", "cpu-icelake") else "full"
        assert default_preset(load_profile(name)) == expected, name


def test_predict_help_names_the_default_preset():
    proc = subprocess.run([sys.executable, "-m", "msbench.cli", "predict", "--help"], capture_output=True, text=True)
    assert "default: full" in " ".join(proc.stdout.split())
