"""Workload plugins: the plugin tutorial's (docs/plugins.md) (examples/plugin/tiny_cnn.py) found by `module:Class`
or an entry point, refused unimported when nothing trusted it, keyed by its sources, and run on the
device model and the real CPU target."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from msbench.errors import ConfigError
from msbench.matrix_file import parse_matrix
from workloads import registry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plugin"
SPEC = "tiny_cnn:TinyCNNWorkload"


@pytest.fixture
def plugin_path(monkeypatch):
    """The tutorial's folder importable here and in child processes (the checkout under test first)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLE), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    yield EXAMPLE
    registry.get_workload.cache_clear()
    sys.modules.pop("tiny_cnn", None)


def matrix(name: str) -> dict:
    return {"name": "plugin", "targets": ["model:cpu"], "workloads": [{"name": name, "preset": "tiny"}]}


def test_a_matrix_naming_a_plugin_imports_nothing_unless_allowed(plugin_path):
    sys.modules.pop("tiny_cnn", None)
    with pytest.raises(ConfigError, match=r"--allow-plugin tiny_cnn:TinyCNNWorkload"):
        parse_matrix(matrix(SPEC), "m.toml", "m")
    assert "tiny_cnn" not in sys.modules
    cells = parse_matrix(matrix(SPEC), "m.toml", "m", plugins=(SPEC,)).expand().cells()
    again = parse_matrix(matrix(SPEC), "m.toml", "m", plugins=(SPEC,)).expand().cells()
    assert [c.workload for c in cells] == [SPEC] and [c.id for c in cells] == [c.id for c in again]


def test_a_name_that_is_neither_known_nor_a_class_path_is_refused():
    with pytest.raises(ConfigError, match="workload='alexnet'"):
        registry.check_workload("alexnet")
    with pytest.raises(ConfigError, match="a concrete subclass of workloads.base.Workload"):
        registry.get_workload("msbench.cell:Cell")


def test_an_installed_entry_point_is_trusted_and_listed(plugin_path, monkeypatch):
    points = {registry.WORKLOAD_GROUP: (("tiny-cnn", SPEC),)}
    monkeypatch.setattr(registry, "installed", lambda group: points.get(group, ()))
    registry.get_workload.cache_clear()
    assert registry.check_workload("tiny-cnn") == "tiny-cnn"
    assert type(registry.get_workload("tiny-cnn")).__name__ == "TinyCNNWorkload"
    assert registry.plugin_names() == ["tiny-cnn"]
    assert registry.workload_origin("tiny-cnn") == f"entry point msbench.workloads -> {SPEC}"


def test_the_plugins_sources_key_its_graphs(tmp_path, monkeypatch):
    from hardware.model.graph import graph_key
    from msbench.settings import Settings

    for f in EXAMPLE.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tiny_cnn", None)
    registry.get_workload.cache_clear()
    try:
        sources = registry.workload_sources(SPEC)
        assert {p.name for p in sources} >= {"tiny_cnn.py", "tiny_cnn.toml", "train_step.py"}
        before = graph_key(SPEC, "tiny", {}, Settings())
        with open(tmp_path / "tiny_cnn.py", "a") as fh:
            fh.write("\n# an edit\n")
        assert graph_key(SPEC, "tiny", {}, Settings()) != before
    finally:
        registry.get_workload.cache_clear()
        sys.modules.pop("tiny_cnn", None)


@pytest.mark.slow
def test_the_tutorial_plugin_runs_on_the_device_model_and_the_cpu_target(plugin_path, scratch, capsys, monkeypatch):
    from msbench.cli import main

    for name, value in (("TIME_BUDGET_S", "0.5"), ("MAX_STEPS", "10"), ("MIN_STEPS", "3"), ("WARMUP_STEPS", "1"),
                        ("MEMORY_PROFILE_STEPS", "1"), ("PROCESSES", "1"), ("MAX_PROCESSES", "1")):
        monkeypatch.setenv(f"MSBENCH_MEASURE_{name}", value)
    assert main(["predict", SPEC, "--allow-plugin", SPEC, "--hardware", "cpu", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert predicted["workload"] == SPEC and predicted["step_time_s"] > 0
    assert main(["measure", SPEC, "--allow-plugin", SPEC, "--json", "--timeout", "300"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["status"] == "ok" and measured["metrics"]["throughput"] > 0


def test_list_workloads_shows_plugins_and_zoos_beside_the_built_ins(plugin_path, monkeypatch):
    from msbench.commands import summary

    points = {registry.WORKLOAD_GROUP: (("tiny-cnn", SPEC),)}
    monkeypatch.setattr(registry, "installed", lambda group: points.get(group, ()))
    monkeypatch.setattr(summary, "workload_row", lambda name: {"name": name})   # sizes: test_summary.py
    rows = {r["name"]: r for r in summary.list_workloads()}
    assert rows["resnet50"]["source"] == "built-in"
    assert rows["tiny-cnn"]["source"] == f"entry point msbench.workloads -> {SPEC}"
    assert rows["mindcv:<model>"]["source"].startswith("zoo adapter over mindcv")
    assert rows["mindyolo:<model>"]["source"].startswith("zoo adapter over mindyolo")
    assert list(rows)[-2:] == ["mindcv:<model>", "mindyolo:<model>"]
