"""The seven LLM knobs: MindSpore's defaults, the combination rules, the workload-dependent rules, the
per-target capability, and that adding them left every existing cell id as it was."""

from __future__ import annotations

import pytest

from hardware.capabilities import Facts, refusal
from hardware.knob_table import capability
from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.matrix import check_workload_settings
from msbench.settings import DEFAULTS, make_settings, parse_assignments

LLM_DEFAULTS = {"tensor_parallel": 1, "pipeline_stages": 1, "micro_batches": 1, "sequence_parallel": False,
                "optimizer_shard": False, "flash_attention": False, "parallel_mode": "data"}
HYBRID = {"devices": 16, "parallel_mode": "semi_auto", "tensor_parallel": 4, "pipeline_stages": 2,
          "micro_batches": 4, "sequence_parallel": True, "optimizer_shard": True, "flash_attention": True,
          "amp_level": "O2"}
FLASH = {"flash_attention": True, "amp_level": "O2"}


def test_defaults_are_mindsporess_and_leave_existing_cell_ids_unchanged():
    assert {k: DEFAULTS[k] for k in LLM_DEFAULTS} == LLM_DEFAULTS
    # ids computed on main (2387116) before the knobs existed
    assert Cell(workload="resnet50").id == "807d56c122fb"
    assert Cell(workload="gpt2-small", settings=make_settings({"devices": 8, "amp_level": "O2"}),
                target="mindspore:cpu").id == "a08b80a57c72"
    assert "tensor_parallel" not in Cell(workload="llama2-7b").key()["settings"]


def test_devices_count_every_card_and_data_parallel_is_what_is_left():
    s = make_settings(HYBRID)
    assert (s.model_parallel, s.data_parallel) == (8, 2)
    assert make_settings({"devices": 8}).data_parallel == 8


def test_command_line_assignments_parse_to_the_knob_types():
    assert parse_assignments(["tensor_parallel=2", "flash_attention=true", "parallel_mode=auto"]) == {
        "tensor_parallel": 2, "flash_attention": True, "parallel_mode": "auto"}
    with pytest.raises(ConfigError, match="parallel_mode='manual'"):
        make_settings({"parallel_mode": "manual"})


@pytest.mark.parametrize("values,field,fragment", [
    ({"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 4, "pipeline_stages": 4, "micro_batches": 4},
     "tensor_parallel", "divide devices"),
    ({"devices": 8, "tensor_parallel": 2}, "tensor_parallel", "semi_auto|auto"),
    ({"devices": 8, "parallel_mode": "semi_auto", "sequence_parallel": True}, "sequence_parallel", "tensor-parallel"),
    ({"devices": 8, "parallel_mode": "semi_auto", "pipeline_stages": 4, "micro_batches": 3}, "micro_batches",
     "at least p micro-batches"),
    ({"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 8, "optimizer_shard": True},
     "optimizer_shard", "nothing to shard"),
])
def test_impossible_combinations_are_refused_with_the_rule(values, field, fragment):
    with pytest.raises(ConfigError) as err:
        make_settings(values)
    assert err.value.field == field and fragment in err.value.rule


def cell(workload: str, **values) -> Cell:
    return Cell(workload=workload, settings=make_settings(values), target="model:ascend910b")


def test_heads_and_kv_heads_must_divide_by_tensor_parallel():
    # llama2-70b tiny: 8 query heads, 2 kv heads -> tp=2 fits, tp=4 splits a kv head
    check_workload_settings(cell("llama2-70b", devices=8, parallel_mode="semi_auto", tensor_parallel=2))
    with pytest.raises(ConfigError) as err:
        check_workload_settings(cell("llama2-70b", devices=8, parallel_mode="semi_auto", tensor_parallel=4))
    assert (err.value.field, err.value.value) == ("tensor_parallel", 4) and "kv_heads=2" in err.value.allowed
    full = Cell(workload="llama2-70b", preset="full", target="model:ascend910b",
                settings=make_settings({"devices": 64, "parallel_mode": "semi_auto", "tensor_parallel": 8}))
    check_workload_settings(full)     # 64 heads / 8 kv heads split over 8 cards


def test_flash_attention_needs_fp16_compute_and_a_head_dimension_the_kernel_takes():
    with pytest.raises(ConfigError, match="amp_level=O0"):
        make_settings({"flash_attention": True})
    check_workload_settings(cell("llama2-7b", **FLASH))             # tiny head dim 16
    with pytest.raises(ConfigError, match="head dimension 8"):
        check_workload_settings(cell("llama2-70b", **FLASH))        # tiny head dim 8


def test_pipeline_stages_cannot_exceed_layers():
    with pytest.raises(ConfigError, match="layers=2"):
        check_workload_settings(cell("gpt3-175b", devices=4, parallel_mode="semi_auto", pipeline_stages=4,
                                     micro_batches=4))


@pytest.mark.parametrize("values", [{"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 2}, FLASH])
def test_networks_without_a_parallel_plan_refuse_it(values):
    with pytest.raises(ConfigError, match="no parallel plan"):
        check_workload_settings(cell("resnet50", **values))
    check_workload_settings(cell("llama2-7b", **values))


def test_capability_per_target_kind():
    s = make_settings(HYBRID)
    assert refusal(s, "mindspore:ascend") is None
    assert "data parallel only" in refusal(s, "mindspore:cpu")
    assert "FlashAttentionScore" in refusal(make_settings(FLASH), "mindspore:gpu")
    assert "hardware/model/llm" in refusal(s, "model:npu")
    assert refusal(s, "model:npu", Facts(llm_composition=True)).startswith("mode=pynative")   # graph + sink only
    assert refusal(s.replace(mode="graph", sink=True), "model:npu", Facts(llm_composition=True)) is None
    assert capability("tensor_parallel", 2, "mindspore:ascend").status == "applied"
    composed_context = {"devices": 8, "parallel_mode": "semi_auto", "mode": "graph", "sink": True}
    assert capability("tensor_parallel", 2, "model:npu", composed_context,
                      facts=Facts(llm_composition=True)).status == "modelled"
    assert capability("optimizer_shard", True, "mindspore:cpu").status == "refused"
