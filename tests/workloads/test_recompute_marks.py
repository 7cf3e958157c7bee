"""One recompute marker for every family, and it survives AMP O1's rewrite of cell classes."""

import pytest

from msbench.settings import make_settings
from workloads.registry import get_workload


@pytest.mark.parametrize("name", ["resnet50", "bert-base", "yolov8n"])
def test_marks_survive_amp_o1_and_full_covers_more(name, scratch):
    from workloads.train_step import apply_amp

    wl = get_workload(name)
    preset = wl.preset("tiny")
    plain = wl.build_network(preset)
    rewritten = apply_amp(wl.build_network(preset), make_settings({"amp_level": "O1"}))
    for full in (False, True):
        assert len(wl.recompute_blocks(rewritten, full)) == len(wl.recompute_blocks(plain, full)) > 0
    assert {id(c) for c in wl.recompute_blocks(plain, False)} != {id(c) for c in wl.recompute_blocks(plain, True)}
