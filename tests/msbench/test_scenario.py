"""scenario = "inference": in the cell and its id only when not `train`, refused knobs, matrix keys."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.matrix_file import load_matrix
from hardware.capabilities import INFERENCE_KNOBS
from hardware.scenarios import scenario_refusal
from msbench.settings import make_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_matrix import write  # noqa: E402


def test_training_cells_keep_the_ids_main_gave_them():
    # Computed with main's code at 2387116, before the scenario field existed.
    assert Cell(workload="resnet50").id == "807d56c122fb"
    graph_bert = Cell(workload="bert-base", settings=make_settings({"mode": "graph", "batch_size": 4}),
                      target="mindspore:cpu")
    assert graph_bert.id == "00add3988862"
    assert "scenario" not in graph_bert.key() and Cell.from_dict(graph_bert.to_dict()).scenario == "train"


def test_an_inference_cell_has_its_own_id_and_reads_back():
    train = Cell(workload="resnet50", settings=make_settings({"mode": "graph"}))
    infer = Cell(workload="resnet50", settings=make_settings({"mode": "graph"}), scenario="inference")
    assert infer.id != train.id and infer.key()["scenario"] == "inference"
    back = Cell.from_dict(infer.to_dict())
    assert back == infer and back.scenario == "inference"
    assert infer.with_target("model:cpu").scenario == "inference"


def test_an_unknown_scenario_is_refused_with_the_allowed_values():
    with pytest.raises(ConfigError, match="scenario='serve' is not allowed.*allowed: train|inference"):
        Cell(workload="resnet50", scenario="serve")


@pytest.mark.parametrize("knob,value", [("optimizer", "adam"), ("grad_accum", 2), ("recompute", "full"),
                                        ("workers", 4), ("devices", 2), ("loss_scale", "dynamic")])
def test_training_knobs_are_refused_under_inference_with_the_reason(knob, value):
    knobs = {knob: value, **({"amp_level": "O2"} if knob == "loss_scale" else {})}
    settings = make_settings(knobs)
    reason = scenario_refusal(settings, "inference")
    assert reason and f"{knob}={value!r}" in reason and "would change nothing" in reason
    assert scenario_refusal(settings, "train") is None


def test_knobs_of_the_forward_network_are_allowed_under_inference():
    settings = make_settings({"mode": "graph", "jit_level": "O1", "amp_level": "O2", "batch_size": 4, "seed": 7})
    assert set(settings.non_default()) <= set(INFERENCE_KNOBS)
    assert scenario_refusal(settings, "inference") is None


MATRIX = """
    name = "inf"
    targets = ["model:cpu"]
    scenario = "inference"
    {extra}
    [[workloads]]
    name = "resnet50"
    preset = "tiny"
    [axes]
    batch_size = [1, 4]
    {axis}
"""


def test_an_inference_matrix_gives_inference_cells_and_marks_training_knobs_invalid(tmp_path):
    exp = load_matrix(write(tmp_path, MATRIX.format(extra="profile = true", axis='optimizer = ["momentum", "adam"]'))).expand()
    assert exp.matrix.profile is True
    assert {e.cell.scenario for e in exp.entries} == {"inference"}
    assert {e.cell.label for e in exp.entries if e.status == "ok"} == {"inference:base", "inference:batch_size=1",
                                                                     "inference:batch_size=4"}
    invalid = [e for e in exp.entries if e.status == "invalid"]
    assert invalid and all(e.cell.settings.optimizer == "adam" and "optimizer='adam'" in e.reason for e in invalid)
    assert all(e.cell.settings.optimizer == "momentum" for e in exp.entries if e.status == "ok")


@pytest.mark.parametrize("extra,field", [('scenario = "serve"', "scenario"), ("accuracy = true", "accuracy"),
                                         ('profile = "yes"', "profile")])
def test_bad_scenario_keys_are_refused(tmp_path, extra, field):
    text = MATRIX.format(extra="", axis="").replace('scenario = "inference"', 'scenario = "inference"\n' + extra)
    if extra.startswith("scenario"):
        text = MATRIX.format(extra="", axis="").replace('scenario = "inference"', extra)
    with pytest.raises(ConfigError, match=f"{field}="):
        load_matrix(write(tmp_path, text))


def test_a_profiled_runs_output_goes_beside_its_run_file(tmp_path):
    from msbench.runner import profile_root

    assert profile_root(tmp_path / "runs" / "perop-cpu.jsonl") == (tmp_path / "runs" / "perop-cpu.profiles").resolve()
