"""`msbench predict --config` end to end on the device model (compiles the LLM blocks: slow).

The Llama 2 7B pretraining config predicts byte for byte what its --set line predicts; the configs in the
shapes of Qwen 1.5 7B, GLM3 6B and Llama 3 8B predict, with their parameter counts in the JSON.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from msbench.cli import main

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
PUBLISHED = tomllib.loads((CONFIGS / "published.toml").read_text())


def predicted(capsys, *argv: str) -> dict:
    assert main(["predict", *argv, "--hardware", "ascend910b", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_llama2_config_predicts_exactly_its_set_equivalent(capsys, scratch):
    from tests.msbench.test_config_import import LLAMA2, LLAMA2_SET

    from_config = predicted(capsys, "--config", str(LLAMA2))
    by_hand = predicted(capsys, "llama2-7b", "--from", "mindspore-defaults", *sum((["--set", s] for s in LLAMA2_SET), []))
    config = from_config.pop("config")
    assert config["parameters"] == 6_738_415_616 and config["workload"] == "llama2-7b"
    assert from_config == by_hand


@pytest.mark.parametrize("name", ["mindformers_qwen1_5_7b", pytest.param("mindformers_glm3_6b", marks=pytest.mark.long),
                                  pytest.param("mindformers_llama3_8b", marks=pytest.mark.long)])
def test_configs_of_other_llm_shapes_predict(capsys, scratch, name):
    out = predicted(capsys, "--config", str(CONFIGS / f"{name}.yaml"))
    assert out["workload"] == "llm" and out["step_time_s"] > 0 and not out["oom"]
    assert out["config"]["parameters"] == pytest.approx(PUBLISHED[name]["params"], rel=0.01)
    assert out["detail"]["composition"].startswith("llm blocks")
