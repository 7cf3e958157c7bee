"""`model:<profile>` as a Target, on real extracted graphs (compile-only MindSpore in a child process)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.model.graph import extract_graph  # noqa: E402
from hardware.model.predict import predict  # noqa: E402
from hardware.model.profile import load_profile  # noqa: E402
from hardware.model.compile_mode import compile_mode  # noqa: E402
from hardware.model.target import ModelTarget  # noqa: E402
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


def fusion_enabled(settings, profile):
    return compile_mode(settings, profile).graph_kernel_fusion


def test_fusion_rule_per_backend():
    o1 = Settings(mode="graph", jit_level="O1")
    assert fusion_enabled(o1, load_profile("ascend910b")) and not fusion_enabled(o1, load_profile("cpu"))
    assert fusion_enabled(Settings(mode="graph", graph_kernel=True), load_profile("cpu"))
    assert not fusion_enabled(Settings(), load_profile("ascend910b"))


def test_compile_mode_prices_dispatch_and_hides_it_off_whole_graph_o2():
    npu = load_profile("ascend910b")
    o2 = compile_mode(Settings(mode="graph", jit_level="O2"), npu)
    assert o2.dispatch_key == "graph_o2_us" and o2.buffer_fusion and not o2.dispatch_hidden
    pynative = compile_mode(Settings(mode="pynative"), npu)
    assert pynative.dispatch_key == "pynative_us" and not pynative.buffer_fusion
    assert pynative.dispatch_hidden == npu.launch.asynchronous
    assert not compile_mode(Settings(mode="graph", jit_level="O2"), load_profile("cpu")).buffer_fusion


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


def test_a_tip_knob_that_reads_pipeline_modes_gets_them_with_its_host_cost():
    """python_multiprocessing reads hardware/calibration/pipeline_modes.json: the plan's host cost carries the
    pipeline's calibrated modes then, and only then."""
    from hardware.model.inputs import plan_host
    from hardware.model.pipeline_modes import modes_of
    from hardware.model.plan import resolve

    def host_of(**knobs):
        cell = Cell(workload="resnet50", preset="full", settings=Settings(mode="graph", **knobs))
        return plan_host(resolve(cell, "ascend910b"))

    assert modes_of(host_of(python_multiprocessing=True)) is not None and modes_of(host_of()) is None
