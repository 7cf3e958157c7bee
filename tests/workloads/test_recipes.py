"""Published recipes (workloads/recipes.toml): what `msbench predict` on a full preset and a matrix workload
with `recipe = true` start from."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from msbench.cli import main
from msbench.errors import ConfigError
from msbench.matrix_file import load_matrix
from msbench.settings import make_settings
from workloads.recipes import recipe_for, recipes
from workloads.registry import get_workload


def test_every_recipe_is_valid_settings_with_its_source_for_a_builtin_workload():
    assert set(recipes()) == {"resnet50", "yolov8s", "bert-base", "yolov5s", "yolov8n", "bert-large", "transformer-base",
                              "transformer-large", "gpt2-small", "llama2-7b", "llama2-13b", "llama2-70b"}
    for name, recipe in recipes().items():
        settings = make_settings(dict(recipe.settings))
        get_workload(name).check_settings(get_workload(name).preset("full"), settings)
        assert recipe.source.startswith("https://github.com/") and len(recipe.source.split("/blob/")[1]) > 40
        assert settings.mode == "graph" and settings.batch_size is not None


def test_a_recipe_applies_to_the_full_preset_only_and_not_from_the_defaults():
    assert recipe_for("resnet50", "full").settings["amp_level"] == "O2"
    assert recipe_for("resnet50", "tiny") is None and recipe_for("gpt3-175b", "full") is None
    assert recipe_for("resnet50", "full", "mindspore-defaults") is None
    with pytest.raises(ConfigError, match="recipe|mindspore-defaults"):
        recipe_for("resnet50", "full", "folklore")


def test_a_matrix_workload_starts_from_its_recipe_with_set_over_it(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(textwrap.dedent("""
        name = "m"
        targets = ["model:ascend910b"]
        [[workloads]]
        name = "bert-base"
        preset = "full"
        recipe = true
        set = { batch_size = 32 }
    """))
    (entry,) = load_matrix(path).expand().entries
    s = entry.cell.settings
    assert (s.optimizer, s.amp_level, s.loss_scale, s.sink, s.batch_size) == ("lamb", "O2", "dynamic", True, 32)
    path.write_text(path.read_text().replace("bert-base", "gpt3-175b"))
    with pytest.raises(ConfigError, match="recipe=True is not allowed"):
        load_matrix(path)


def test_the_nightly_matrix_varies_each_tip_from_the_recipes_on_both_chips():
    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrices" / "nightly.toml")
    assert set(matrix.targets) == {"model:ascend910a", "model:ascend910b"}
    baselines = {(e.cell.workload, e.cell.target): e.cell.settings for e in matrix.expand().entries if e.baseline}
    for (workload, _), settings in baselines.items():
        assert {k: getattr(settings, k) for k in recipes()[workload].settings} == recipes()[workload].settings
    assert all(e.status == "ok" for e in matrix.expand().entries)


def test_predict_names_the_recipe_it_started_from(capsys, monkeypatch):
    from msbench.commands import predict

    seen = []
    monkeypatch.setattr(predict, "cell_prediction", lambda cell: seen.append(cell) or (None, json.dumps({"x": 1})))
    assert main(["predict", "yolov8s", "--hardware", "ascend910b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recipe"] == recipes()["yolov8s"].source
    assert seen[-1].settings.workers == 4 and seen[-1].settings.batch_size == 16
    assert main(["predict", "yolov8s", "--hardware", "ascend910b", "--from", "mindspore-defaults", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recipe"] is None and seen[-1].settings.workers == 1
    assert main(["predict", "resnet50", "--hardware", "ascend910b", "--set", "amp_level=O0"]) == 2
    assert "over the resnet50 recipe" in capsys.readouterr().err
