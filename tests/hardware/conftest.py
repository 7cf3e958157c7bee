"""Fixtures of the MindSpore-target tests: the toy workload reachable from child processes and a
small measurement budget, so each real cell run takes a few seconds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from toy_workload import TOY_NAME  # noqa: E402


@pytest.fixture
def toy_env(scratch, private_cache, monkeypatch):
    """cwd = scratch, private msbench cache, `toy_workload` importable in children, measuring kept short."""
    # The checkout under test first: children run in the scratch directory, where the editable install
    # of another checkout (a git worktree's main) would otherwise be imported instead.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]))
    for name, value in (("TIME_BUDGET_S", "0.5"), ("MAX_STEPS", "40"), ("MIN_STEPS", "4"), ("WARMUP_STEPS", "1"),
                        ("MEMORY_PROFILE_STEPS", "1"), ("PROCESSES", "2"), ("MAX_PROCESSES", "2")):
        monkeypatch.setenv(f"MSBENCH_MEASURE_{name}", value)
    return scratch


@pytest.fixture
def toy_cell():
    """A toy cell on mindspore:cpu with the given knobs (and preset)."""
    from msbench.cell import Cell
    from msbench.settings import make_settings

    def make(preset: str = "tiny", overrides: dict | None = None, **knobs) -> Cell:
        return Cell(workload=TOY_NAME, preset=preset, overrides=overrides or {}, settings=make_settings(knobs),
                    target="mindspore:cpu")
    return make


@pytest.fixture
def forbid_compiles(monkeypatch):
    """Call it to make any further graph compile fail the test (what `prepare` should already have made)."""
    from hardware.model import graph

    def forbid() -> None:
        def no_compile(*_args, **_kwargs):
            raise AssertionError("a cell compiled a graph that prepare should have")

        monkeypatch.setattr(graph, "run_extract", no_compile)
        monkeypatch.setattr(graph, "run_extract_batch", no_compile)

    return forbid
