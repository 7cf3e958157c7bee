"""The walk over every mindcv model the `mindcv:` adapter offers (hardware/model/zoo_walk.py): its
bookkeeping (fast), a sample extracted for real (slow), and every model with MSBENCH_ZOO_WALK=all (hours on
a 2-core machine: 275 compiles; docs/plugins.md has the counts of the last full walk)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("mindcv", reason="the zoo extra is not installed: pip install -e '.[zoo]'")

from hardware.model import zoo_walk  # noqa: E402
from hardware.model.graph import ExtractionError  # noqa: E402
from msbench.errors import ConfigError  # noqa: E402
from workloads import registry  # noqa: E402
from workloads.zoo import mindcv as adapter  # noqa: E402

# Cheap compiles of different kinds: ConvNeXt reads a parameter's value while it is built, the others are a
# depthwise/SE network, a channel-shuffle network and a fire-module network.
SAMPLE = ("convnext_tiny", "mobilenet_v3_small_075", "shufflenet_v2_x0_5", "squeezenet1_1")


def test_the_walk_offers_every_mindcv_model_and_samples_every_module_once():
    from mindcv.models import list_models

    models = adapter.offered_models()
    assert models == sorted(list_models()) and len(models) > 200
    sample = zoo_walk.one_per_module(models)
    assert len({adapter.module_of(m) for m in sample}) == len(sample) == len({adapter.module_of(m) for m in models})


def test_an_unsupported_model_is_refused_with_its_reason(monkeypatch):
    monkeypatch.setattr(adapter, "unsupported", lambda: {"resnet18": "its compile fails: why"})
    with pytest.raises(ConfigError, match=r"mindcv model='resnet18' is not allowed \(its compile fails: why\)"):
        registry.get_workload("mindcv:resnet18")


def test_each_model_is_ok_failed_or_refused_with_the_first_line_of_why(monkeypatch):
    class Graph:
        ops, param_count = [1, 2, 3], 42

    def compiled(job):
        if "squeezenet" in job.request["workload"]:
            raise ExtractionError("graph extraction failed: RuntimeError: no CPU kernel for Foo\nC++ trace ...")
        return Graph()

    monkeypatch.setattr(zoo_walk, "compile_missing_graphs", lambda jobs: None)
    monkeypatch.setattr(zoo_walk, "compiled_graph", compiled)
    monkeypatch.setattr(adapter, "unsupported", lambda: {"ghostnet_050": "refused here"})
    results = {r.model: r for r in zoo_walk.walk(["ghostnet_050", "squeezenet1_1", "resnet18"])}
    assert results["resnet18"] == zoo_walk.WalkResult("resnet18", "resnet", "ok", ops=3, param_count=42)
    assert results["squeezenet1_1"].status == "failed"
    assert results["squeezenet1_1"].reason == "ExtractionError: graph extraction failed: RuntimeError: no CPU kernel for Foo"
    assert results["ghostnet_050"].status == "refused" and "refused here" in results["ghostnet_050"].reason
    assert zoo_walk.counts(list(results.values())) == {"models": 3, "ok": 1, "failed": 1, "refused": 1}


@pytest.mark.slow
@pytest.mark.long
def test_a_sample_of_the_zoo_extracts(private_cache, scratch):
    results = list(zoo_walk.walk(list(SAMPLE)))
    assert [(r.model, r.status) for r in results] == [(m, "ok") for m in SAMPLE], [r.reason for r in results]
    assert all(r.ops > 50 and r.param_count > 100_000 for r in results)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MSBENCH_ZOO_WALK") != "all", reason="hours: set MSBENCH_ZOO_WALK=all")
def test_every_zoo_model_extracts_or_is_refused_with_a_reason(private_cache, scratch):
    failed = [r for r in zoo_walk.walk(adapter.offered_models()) if r.status == "failed"]
    assert not failed, "\n".join(f"{r.model}: {r.reason}" for r in failed)
