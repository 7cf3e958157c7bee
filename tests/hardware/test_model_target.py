"""`model:<profile>` as a Target, on real extracted graphs (compile-only MindSpore in a child process)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.model.graph import extract_graph  # noqa: E402
from hardware.model.predict import predict  # noqa: E402
from hardware.model.profile import load_profile  # noqa: E402
from hardware.model.target import ModelTarget, fusion_enabled  # noqa: E402
from model_graphs import FakeHost  # noqa: E402
from msbench.cell import Cell  # noqa: E402
from msbench.errors import ConfigError  # noqa: E402
from msbench.settings import Settings  # noqa: E402
from msbench.targets import resolve_target  # noqa: E402


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    """One msbench cache for the module: each graph is extracted once, then read back."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("model-cache")
        mp.setenv("MSBENCH_CACHE", str(path))
        mp.chdir(path)
        yield path


def test_resolves_by_name_and_refuses_unknown_profiles():
    target = resolve_target("model:ascend910b")
    assert isinstance(target, ModelTarget) and target.name == "model:ascend910b" and not target.isolate
    with pytest.raises(ConfigError, match="ascend910b"):
        ModelTarget("ascend999")


def test_supports_sink_only_where_the_profile_has_it():
    cell = Cell(workload="resnet50", settings=Settings(mode="graph", sink=True))
    assert "sink" in ModelTarget("cpu").supports(cell)
    assert ModelTarget("ascend910b").supports(cell) is None


def test_fusion_rule_per_backend():
    o1 = Settings(mode="graph", jit_level="O1")
    assert fusion_enabled(o1, load_profile("ascend910b")) and not fusion_enabled(o1, load_profile("cpu"))
    assert fusion_enabled(Settings(mode="graph", graph_kernel=True), load_profile("cpu"))
    assert not fusion_enabled(Settings(), load_profile("ascend910b"))


@pytest.mark.slow
def test_run_fills_a_deterministic_record(model_cache):
    cell = Cell(workload="resnet50", preset="tiny", settings=Settings(mode="graph"), target="model:ascend910b")
    first, second = ModelTarget("ascend910b").run(cell), ModelTarget("ascend910b").run(cell)
    m = first.metrics
    assert first.status == "ok" and first.profile_hash == load_profile("ascend910b").digest
    assert m.step_time_s > 0 and m.throughput == pytest.approx(32 / m.step_time_s, rel=1e-5)
    assert m.peak_memory_source == "model" and 0 < m.peak_memory_bytes < m.memory_capacity_bytes
    assert m.bound in ("compute", "memory", "host", "data", "comm") and 0 < m.mfu < 1
    assert sum(m.breakdown.values()) == pytest.approx(m.step_time_s, rel=1e-4)
    assert first.metrics == second.metrics


@pytest.mark.slow
def test_oom_flips_as_batch_grows_on_a_real_graph(model_cache):
    """ResNet-50 tiny at 224x224 on 910A (29.96 GiB usable): a batch of 256 fits (1.8 GiB), 8192 cannot
    (about 45 GiB; 4096 fits at 22.5 GiB since the parser keeps only the outputs backward reads)."""
    a = load_profile("ascend910a")
    verdicts = {}
    for batch in (256, 8192):
        settings = Settings(mode="graph", amp_level="O3", loss_scale="static", batch_size=batch)
        graph = extract_graph("resnet50", "tiny", {"image_size": 224}, settings)
        verdicts[batch] = predict(graph, settings, a, FakeHost()).oom
    assert verdicts == {256: False, 8192: True}
