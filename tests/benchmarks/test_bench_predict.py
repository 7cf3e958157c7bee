"""Speed of the device model with warm caches (pytest-benchmark; run with --benchmark-enable).

Claims (issue 5): one cell < 10 ms warm; every cell of the nightly matrix on three profiles < 10 s
warm. Both include the real product path after extraction: reading the cached graph and the host-cost file,
fusion, and the pure prediction. The warm-up (first) round pays any cold extraction; it is not timed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware.model.graph import CACHE_KIND as GRAPH_CACHE, graph_key
from hardware.model.target import ModelTarget, predict_cell
from msbench.cache import cache_get
from msbench.matrix import load_matrix
from msbench.settings import Settings

NIGHTLY = Path(__file__).resolve().parents[2] / "matrices" / "nightly.toml"
PROFILES = ("ascend910a", "ascend910b", "atlas300i-duo")


@pytest.fixture
def in_scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.slow
def test_one_cell_warm(benchmark, in_scratch):
    settings = Settings(mode="graph", amp_level="O2", loss_scale="dynamic")
    predict_cell("resnet50", "tiny", {}, settings, "ascend910b")          # warm the caches
    result = benchmark.pedantic(predict_cell, args=("resnet50", "tiny", {}, settings, "ascend910b"),
                                rounds=20, warmup_rounds=1)
    assert result.prediction.step_time_s > 0
    if benchmark.stats:                                                     # None when benchmarks are disabled
        assert benchmark.stats.stats.median < 0.010


def predict_nightly() -> int:
    cells = load_matrix(NIGHTLY).expand().cells()
    done = 0
    for profile in PROFILES:
        target = ModelTarget(profile)
        for cell in cells:
            if target.supports(cell) is None:
                target.run(cell.with_target(f"model:{profile}"))
                done += 1
    return done


def nightly_cold_cells() -> int:
    """Nightly cells whose graph is not cached yet (extracting 21 full-size graphs cold takes many
    minutes on 2 cores: warm them with `msbench run matrices/nightly.toml`); the host cost is a file."""
    cold = 0
    for c in load_matrix(NIGHTLY).expand().cells():
        if cache_get(GRAPH_CACHE, graph_key(c.workload, c.preset, c.overrides, c.settings)) is None:
            cold += 1
    return cold


@pytest.mark.slow
def test_nightly_matrix_three_profiles_warm(benchmark, in_scratch):
    cold = nightly_cold_cells()
    if cold:
        pytest.skip(f"{cold} nightly cells have no cached graph: this claim is about warm caches")
    done = benchmark.pedantic(predict_nightly, rounds=3, warmup_rounds=0)
    assert done > 3 * 20
    if benchmark.stats:
        assert benchmark.stats.stats.median < 10.0
