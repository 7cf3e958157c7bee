"""Speed of the device model with warm caches (pytest-benchmark; run with --benchmark-enable).

Claims (issue 5): one cell < 10 ms warm; every cell of the nightly matrix on three profiles < 10 s
warm. Both include the real product path after extraction: reading the cached graph and host cost,
fusion, and the pure prediction. The warm-up (first) round pays any cold extraction; it is not timed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware.model.target import ModelTarget, predict_cell
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


@pytest.mark.slow
def test_nightly_matrix_three_profiles_warm(benchmark, in_scratch):
    predict_nightly()                                                       # cold extraction, not timed
    done = benchmark.pedantic(predict_nightly, rounds=3, warmup_rounds=0)
    assert done > 3 * 20
    if benchmark.stats:
        assert benchmark.stats.stats.median < 10.0
