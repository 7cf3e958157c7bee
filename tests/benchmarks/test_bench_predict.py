"""Speed of the device model with warm caches (pytest-benchmark, run with --benchmark-enable by `make test`).

Claims (issue 5): one cell < 10 ms warm; every cell of the nightly matrix on three profiles < 10 s
warm. Both include the real product path after extraction: reading the cached graph and the host-cost file,
fusion, and the pure prediction. The warm-up (first) round pays any cold extraction; it is not timed.
The nightly claim is timed on the nightly's ResNet-50 cells (published size) that read its baseline's op
graph: every tip that leaves the graph as it is (mode, fusion, the data pipeline, sink, devices, memory
reuse), whose two reference-batch graphs the test compiles itself (23 s here; all 56 compiles of
the matrix took 7 min quiet, the 14 of its ResNet-50 cells 5.5 min under load), against the claim's budget
per prediction: 10 s x (their predictions / the nightly's). A recorded cell also carries its prediction at
each end of every estimate range it read (hardware/model/estimate_ends.py, about 40 predictions more):
that cost has a claim of its own, one full-size cell's ends < 2 s warm.
Thresholds are on the minimum (the claim) and the median (generous: CI machines are shared), never
the mean, which one descheduled round drags.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware.model.graph import graph_key
from hardware.model.outcome import predict_cell
from hardware.model.target import ModelTarget
from msbench.cell import Cell
from msbench.matrix_file import load_matrix
from msbench.settings import Settings

NIGHTLY = Path(__file__).resolve().parents[2] / "matrices" / "nightly.toml"
PROFILES = ("ascend910a", "ascend910b", "atlas300i-duo")


@pytest.fixture
def in_scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.slow
def test_one_cell_warm(benchmark, in_scratch):
    settings = Settings(mode="graph", amp_level="O2", loss_scale="dynamic")
    cell = Cell(workload="resnet50", settings=settings)
    predict_cell(cell, "ascend910b")          # warm the caches
    result = benchmark.pedantic(predict_cell, args=(cell, "ascend910b"),
                                rounds=20, warmup_rounds=1)
    assert result.prediction.step_time_s > 0
    stats = benchmark.stats.stats
    assert stats.min < 0.010 and stats.median < 0.040       # the claim; 5.0 ms min here, 15 ms before the kernel memo


@pytest.mark.slow
def test_pure_prediction_of_every_nightly_variant(benchmark, in_scratch):
    """`predict` alone (no cache read), for the settings of every nightly cell, on one real graph."""
    from hardware.model.predict import predict
    from hardware.model.profile import load_profile
    from hardware.model.inputs import plan_graph, plan_host
    from hardware.model.plan import resolve

    profile = load_profile("ascend910b")
    variants = [c.settings for c in nightly_cells() if c.workload == "resnet50"]
    base = Settings(mode="graph")
    graph = plan_graph(resolve(Cell(workload="resnet50", settings=base), profile))
    hosts = [plan_host(resolve(Cell(workload="resnet50", settings=s), profile)) for s in variants]  # with tip modes

    def predict_all() -> list:
        return [predict(graph, s, profile, host) for s, host in zip(variants, hosts)]

    predictions = benchmark.pedantic(predict_all, rounds=10, warmup_rounds=1)
    assert len(predictions) == len(variants) > 10 and all(p.step_time_s > 0 for p in predictions)
    per_cell = benchmark.stats.stats.median / len(variants)
    # Each prediction lowers the graph to Ascend's kernels first (hardware/model/lowering.py); a process keeps
    # the lowered ops per graph and rules (lowering.lowered_ops), so a matrix pays it once per graph: 4.6 ms
    # a cell here, quiet (82 ms for the 18 resnet50 variants); the claim is the warm cell's 15 ms.
    assert benchmark.stats.stats.min / len(variants) < 0.015 and per_cell < 0.040


@pytest.fixture(scope="module")
def nightly_resnet_cells(tmp_path_factory) -> list:
    """The nightly matrix's ResNet-50 cells on its baseline's graph, compiled as `msbench run` compiles
    them (prepare)."""
    resnet = [c for c in nightly_cells() if c.workload == "resnet50"]
    baseline = graph_key(resnet[0].workload, resnet[0].preset, resnet[0].overrides, resnet[0].settings)
    cells = [c for c in resnet if graph_key(c.workload, c.preset, c.overrides, c.settings) == baseline]
    assert resnet[0].label == "base" and len(cells) >= 10
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("nightly-prepare"))
        for profile in PROFILES:
            ModelTarget(profile).prepare([c.with_target(f"model:{profile}") for c in cells], announce=lambda _: None)
    return cells


def nightly_cells() -> list:
    """The nightly's cells of one of its targets (the others are the same cells on another profile)."""
    matrix = load_matrix(NIGHTLY)
    return [c for c in matrix.expand().cells() if c.target == matrix.targets[0]]


def supported(cells: list) -> list[tuple[ModelTarget, object]]:
    """(target, cell) for every cell each of the three profiles predicts."""
    targets = [ModelTarget(profile) for profile in PROFILES]
    return [(t, c.with_target(t.name)) for t in targets for c in cells if t.supports(c) is None]


@pytest.mark.slow
def test_nightly_matrix_three_profiles_warm(benchmark, in_scratch, nightly_resnet_cells):
    from hardware.model.outcome import predict_plan

    nightly = len(supported(nightly_cells()))
    runs = supported(nightly_resnet_cells)

    def predict_all() -> int:
        return sum(predict_plan(target.plan(cell), with_ends=False).record.status == "ok" for target, cell in runs)

    done = benchmark.pedantic(predict_all, rounds=3, warmup_rounds=0)
    assert done == len(runs) > 3 * 10 and nightly > 3 * 40
    budget = 10.0 * len(runs) / nightly            # the nightly's 10 s, for this share of its predictions
    assert benchmark.stats.stats.min < budget and benchmark.stats.stats.median < 2 * budget


@pytest.mark.slow
def test_a_full_size_cells_estimate_ends_warm(benchmark, in_scratch, nightly_resnet_cells):
    from hardware.model.estimate_ends import estimate_ends
    from hardware.model.outcome import model_prediction
    from hardware.model.plan import resolve

    plan = resolve(nightly_resnet_cells[0], "ascend910b")
    result = model_prediction(plan)
    ends = benchmark.pedantic(estimate_ends, args=(result, plan.settings, False), rounds=3, warmup_rounds=1)
    assert len(ends) > 10
    assert benchmark.stats.stats.min < 2.0 and benchmark.stats.stats.median < 4.0   # 0.6 s here, loaded
