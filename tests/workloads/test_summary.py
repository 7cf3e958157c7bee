"""`msbench list workloads`: rows computed from the built network, cached, and loud about missing modules."""

from __future__ import annotations

import json

import pytest

from msbench.commands import summary
from msbench.errors import UserError
from workloads import registry

RESNET50_PARAMS = 25_557_032
# Published: ResNet-50 at 224x224 has 4.09 G multiply-accumulates in its convolutions and classifier
# (torchvision's "4.09 GFLOPS"); forward_flops counts 2 x MAC of matrix ops.
RESNET50_GFLOPS = 2 * 4.09


@pytest.mark.slow
def test_resnet50_row_is_computed_then_cached(scratch, private_cache, monkeypatch):
    row = summary.workload_row("resnet50")
    assert set(row) >= {"name", "family", "presets", "input_shape", "params", "gflops"}
    assert row["name"] == "resnet50" and row["family"] == "resnet"
    assert row["presets"] == ["accuracy", "full", "tiny"]
    assert row["input_shape"] == "image 3x224x224"
    assert row["params"] == RESNET50_PARAMS
    assert row["gflops"] == pytest.approx(RESNET50_GFLOPS, rel=0.01)
    json.dumps(row)

    def rebuilt(workload):
        raise AssertionError("a cached row was rebuilt")

    monkeypatch.setattr(summary, "compute_row", rebuilt)
    assert summary.workload_row("resnet50") == row


def test_a_workload_whose_module_is_missing_is_an_error_naming_it(monkeypatch, private_cache):
    monkeypatch.setitem(registry.WORKLOADS, "ghost-net", "workloads.ghost.workload:GhostWorkload")
    with pytest.raises(UserError, match=r"ghost-net .*cannot import 'workloads\.ghost\.workload"):
        summary.list_workloads(["ghost-net"])


def test_cache_key_changes_with_the_preset(monkeypatch):
    workload = registry.get_workload("resnet50")
    before = summary.row_key(workload)
    full = workload.preset("full", {"num_classes": 10})
    monkeypatch.setattr(type(workload), "preset", lambda self, name="tiny", overrides=None: full)
    assert summary.row_key(workload) != before
