"""Seeds of one setting trained on one compiled step (workloads.reseed) give exactly a fresh build's run."""

from __future__ import annotations

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [{"amp_level": "O2", "loss_scale": "dynamic"}, {"optimizer": "adam", "lr_schedule": "cosine"}])
def test_a_reseeded_step_trains_exactly_as_a_fresh_build(toy_env, toy_cell, knobs):
    from hardware.mindspore.accuracy import run_accuracy_child, seed_cells

    first, second = seed_cells(toy_cell(overrides={"epochs": 1}, **knobs), 2)
    reused = run_accuracy_child([first, second], timeout=600)
    fresh = run_accuracy_child([second], timeout=600)[0]
    assert reused[1]["losses"] == fresh["losses"] and reused[1]["value"] == fresh["value"]
    assert reused[0]["losses"] != fresh["losses"]             # the seed moved init and data order
    assert reused[1]["cpu_s"] > 0 and reused[1]["preset"] == "tiny"


def test_fp16_trainings_are_estimated_dearer_than_fp32_and_unknown_workloads_free():
    from hardware.mindspore.accuracy import FP16_COST, budget_medians, training_cost
    from msbench.cell import Cell
    from msbench.settings import make_settings

    def cell(workload, amp):
        return Cell(workload=workload, preset="full", settings=make_settings({"amp_level": amp}), target="model:ascend910b")

    median = budget_medians()["resnet50"]
    assert training_cost(cell("resnet50", "O0"), 6) == 6 * median
    assert training_cost(cell("resnet50", "O2"), 6) == 6 * median * FP16_COST
    assert training_cost(cell("no-such-workload", "O2"), 6) == 0.0
