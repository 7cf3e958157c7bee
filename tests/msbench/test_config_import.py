"""`msbench predict --config` / a matrix workload's `config =`: MindFormers training configs as cells.

The fixtures (tests/fixtures/configs/) are written in MindFormers' documented schema; the published parameter
counts they are checked against sit in published.toml beside them, with their sources.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from msbench.cell import Cell
from msbench.cli import build_parser, main
from msbench.commands.cell_args import cell_from_args
from msbench.commands.config_cell import config_cell
from msbench.errors import ConfigError, UserError
from msbench.importers import import_config
from msbench.importers.fields import KNOB, NOT_MODELLED, PRESET, UNKNOWN, flatten
from msbench.importers.mindformers import ffn_width
from msbench.importers.yaml_file import load_yaml
from msbench.matrix_file import load_matrix

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
LLAMA2 = CONFIGS / "mindformers_llama2_7b_pretrain.yaml"
PUBLISHED = tomllib.loads((CONFIGS / "published.toml").read_text())
# The --set line a user would write by hand for the Llama 2 7B pretraining config.
LLAMA2_SET = ["mode=graph", "jit_level=O1", "sink=true", "amp_level=O2", "loss_scale=dynamic", "batch_size=2",
              "grad_accum=4", "devices=8", "parallel_mode=semi_auto", "optimizer_shard=true", "optimizer=adamw",
              "lr_schedule=cosine", "recompute=selective", "flash_attention=true"]


def args_of(*argv: str):
    return build_parser().parse_args(["predict", *argv])


def test_the_llama2_7b_config_is_the_cell_of_its_set_equivalent():
    by_hand = cell_from_args(args_of("llama2-7b", *sum((["--set", s] for s in LLAMA2_SET), [])), "model:ascend910b")
    cell, imported = config_cell(args_of("--config", str(LLAMA2)), "model:ascend910b")
    assert (imported.workload, imported.preset, dict(imported.overrides)) == ("llama2-7b", "full", {})
    assert cell.key() == by_hand.key() and cell.id == by_hand.id


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_config_counts_its_published_parameters(name):
    imported = import_config(CONFIGS / f"{name}.yaml")
    ref = PUBLISHED[name]
    assert imported.parameters == pytest.approx(ref["params"], rel=ref["tolerance"])


def test_other_shapes_are_the_llm_workload_with_their_fields_as_overrides():
    qwen = import_config(CONFIGS / "mindformers_qwen1_5_7b.yaml")
    glm = import_config(CONFIGS / "mindformers_glm3_6b.yaml")
    llama3 = import_config(CONFIGS / "mindformers_llama3_8b.yaml")
    assert (qwen.workload, dict(qwen.overrides)) == ("llm", {"vocab_size": 151936, "qkv_bias": True})
    assert dict(glm.overrides) == {"layers": 28, "kv_heads": 2, "ff_dim": 13696, "vocab_size": 65024,
                                   "seq_len": 2048, "qkv_bias": True}
    assert dict(llama3.overrides) == {"kv_heads": 8, "ff_dim": 14336, "vocab_size": 128256, "seq_len": 8192}
    # the layout: Llama 3 on two pipeline stages of 4-way tensor parallel, eight micro-batches of one sequence
    assert {k: llama3.knobs[k] for k in ("devices", "tensor_parallel", "pipeline_stages", "micro_batches",
                                         "batch_size", "sequence_parallel")} == \
        {"devices": 8, "tensor_parallel": 4, "pipeline_stages": 2, "micro_batches": 8, "batch_size": 8,
         "sequence_parallel": True}


def test_mindformers_ffn_rule_gives_the_released_widths():
    assert ffn_width(4096, 256, None) == 11008        # Llama 2 7B
    assert ffn_width(5120, 256, None) == 13824        # Llama 2 13B
    assert ffn_width(8192, 4096, 1.3) == 28672        # Llama 2 70B (params.json: multiple_of 4096, 1.3)
    assert ffn_width(4096, 1024, 1.3) == 14336        # Llama 3 8B


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_every_field_is_accounted_for_once_and_none_is_unknown(name):
    path = CONFIGS / f"{name}.yaml"
    imported = import_config(path)
    assert [f.path for f in imported.fields] == list(flatten(load_yaml(path)))
    assert {f.use for f in imported.fields} <= {KNOB, PRESET, NOT_MODELLED}
    assert all(f.to for f in imported.fields)
    assert [f.path for f in imported.fields if f.to == UNKNOWN] == []


def test_an_unknown_key_is_listed_as_not_read_never_dropped(tmp_path):
    text = LLAMA2.read_text() + "\nmy_new_option:\n  speed: 11\n"
    (tmp_path / "c.yaml").write_text(text)
    fields = {f.path: f for f in import_config(tmp_path / "c.yaml").fields}
    assert fields["my_new_option.speed"].use == NOT_MODELLED and fields["my_new_option.speed"].to == UNKNOWN


def test_a_knob_the_llm_composition_refuses_is_left_at_its_default_with_the_reason():
    fields = {f.path: f for f in import_config(LLAMA2).fields}
    workers = fields["train_dataset.num_parallel_workers"]
    assert workers.use == NOT_MODELLED and workers.to.startswith("workers=8 left at its default: the LLM composition")
    assert fields["runner_wrapper.use_clip_grad"].use == NOT_MODELLED
    assert fields["parallel_config.data_parallel"].to == "devices=8 (data x model x pipeline parallel)"


def test_a_value_mindspore_ignores_is_not_set_and_says_which_rule(tmp_path):
    text = LLAMA2.read_text().replace("use_seq_parallel: False", "use_seq_parallel: True")
    (tmp_path / "c.yaml").write_text(text)
    imported = import_config(tmp_path / "c.yaml")
    assert "sequence_parallel" not in imported.knobs
    use = {f.path: f for f in imported.fields}["parallel_config.use_seq_parallel"]
    assert use.use == NOT_MODELLED and "tensor-parallel group" in use.to


def test_use_parallel_false_is_one_card(tmp_path):
    (tmp_path / "c.yaml").write_text(LLAMA2.read_text().replace("use_parallel: True", "use_parallel: False"))
    imported = import_config(tmp_path / "c.yaml")
    assert "devices" not in imported.knobs and "parallel_mode" not in imported.knobs
    assert {f.path: f for f in imported.fields}["parallel_config.data_parallel"].use == NOT_MODELLED


@pytest.mark.parametrize("edit, field", [
    (("data_parallel: 8", "data_parallel: 3"), "parallel_config.data_parallel"),
    (("compute_dtype: \"float16\"", "compute_dtype: \"int8\""), "model.model_config.compute_dtype"),
    (("num_heads: 32", "num_heads: 30"), "heads"),
    (("max_device_memory: \"58GB\"", "max_device_memory: \"lots\""), "context.max_device_memory"),
])
def test_a_bad_value_is_one_line_naming_the_field(tmp_path, edit, field):
    (tmp_path / "c.yaml").write_text(LLAMA2.read_text().replace(*edit))
    with pytest.raises(ConfigError) as err:
        import_config(tmp_path / "c.yaml")
    assert field in str(err.value) and "\n" not in str(err.value)


def test_mixture_of_experts_and_unknown_files_are_refused(tmp_path):
    (tmp_path / "moe.yaml").write_text(LLAMA2.read_text() + "\nmoe_config:\n  expert_num: 8\n")
    with pytest.raises(UserError, match="mixture-of-experts"):
        import_config(tmp_path / "moe.yaml")
    (tmp_path / "cv.yaml").write_text("model: resnet50\nbatch_size: 32\n")
    with pytest.raises(UserError, match="not a config msbench reads"):
        import_config(tmp_path / "cv.yaml")
    (tmp_path / "bad.yaml").write_text("model: [unclosed\n")
    with pytest.raises(UserError, match="malformed YAML"):
        import_config(tmp_path / "bad.yaml")


def test_base_config_files_are_merged_under_the_file(tmp_path):
    data = load_yaml(LLAMA2)
    model = data.pop("model")
    (tmp_path / "model.yaml").write_text(json.dumps({"model": model}))     # JSON is YAML
    (tmp_path / "run.yaml").write_text(json.dumps({**data, "base_config": ["model.yaml"],
                                                   "model": {"model_config": {"seq_length": 2048}}}))
    imported = import_config(tmp_path / "run.yaml")
    assert (imported.workload, dict(imported.overrides)) == ("llm", {"seq_len": 2048})


def test_set_and_override_go_over_the_config_and_workload_with_config_is_refused(capsys):
    cell, _ = config_cell(args_of("--config", str(LLAMA2), "--set", "flash_attention=false",
                                  "--override", "seq_len=2048"), "model:ascend910b")
    assert not cell.settings.flash_attention and cell.overrides == {"seq_len": 2048}
    assert main(["predict", "llama2-7b", "--config", str(LLAMA2)]) == 2
    assert "WORKLOAD=llama2-7b is not allowed with --config" in capsys.readouterr().err


def test_a_matrix_workload_reads_a_config_beside_the_matrix(tmp_path):
    (tmp_path / "job.yaml").write_text(LLAMA2.read_text())
    (tmp_path / "m.toml").write_text('name = "job"\n[[workloads]]\nconfig = "job.yaml"\n'
                                     '[workloads.set]\nflash_attention = false\n[axes]\nrecompute = ["full"]\n')
    cells = load_matrix(tmp_path / "m.toml").expand().cells()
    by_hand = cell_from_args(args_of("llama2-7b", *sum((["--set", s] for s in LLAMA2_SET), []),
                                     "--set", "flash_attention=false"), "model:ascend910b")
    assert cells[0] == Cell(workload="llama2-7b", preset="full", settings=by_hand.settings)
    (tmp_path / "m.toml").write_text('[[workloads]]\nconfig = "job.yaml"\nname = "llama2-7b"\n')
    with pytest.raises(ConfigError, match="absent with config"):
        load_matrix(tmp_path / "m.toml")


def test_the_json_prediction_carries_the_config_and_its_parameter_count(monkeypatch, capsys):
    """Without compiling: the prediction itself is stubbed; what --config adds around it is checked."""
    import msbench.commands.predict as predict

    monkeypatch.setattr(predict, "cell_prediction", lambda cell: (None, json.dumps({"cell_id": cell.id})))
    assert main(["predict", "--config", str(CONFIGS / "mindformers_glm3_6b.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["parameters"] == 6_243_584_000 and out["config"]["format"] == "mindformers"
    assert out["config"]["file"].endswith("mindformers_glm3_6b.yaml") and out["recipe"] is None
    assert any(f["use"] == NOT_MODELLED for f in out["config"]["fields"])


def test_a_mindcv_config_is_a_cell_of_the_mindcv_adapter():
    pytest.importorskip("mindcv", reason="the zoo extra is not installed: pip install -e '.[zoo]'")
    path = CONFIGS / "mindcv_resnet50.yaml"
    imported = import_config(path)
    assert (imported.workload, imported.preset, dict(imported.overrides)) == ("mindcv:resnet50", "full", {})
    assert {f.path: f.to for f in imported.fields}["image_resize"] == "image_size=224"
    assert dict(imported.knobs) == {"mode": "graph", "batch_size": 64, "workers": 8, "sink": True, "amp_level": "O2",
                                    "loss_scale": "static", "lr_schedule": "cosine"}
    fields = {f.path: f for f in imported.fields}
    assert [f.path for f in imported.fields] == list(flatten(load_yaml(path)))
    assert [p for p, f in fields.items() if f.to == UNKNOWN] == []
    assert fields["distribute"].use == NOT_MODELLED and "--set devices=N" in fields["distribute"].to
    assert fields["opt"].use == KNOB and fields["hflip"].use == NOT_MODELLED


def test_a_mindcv_recipes_augmentations_are_preset_fields_of_the_adapter(tmp_path):
    pytest.importorskip("mindcv", reason="the zoo extra is not installed: pip install -e '.[zoo]'")
    text = (CONFIGS / "mindcv_resnet50.yaml").read_text().replace("interpolation: 'bilinear'", "interpolation: 'bicubic'")
    path = tmp_path / "augmented.yaml"
    path.write_text(text + "auto_augment: 'randaug-m9-mstd0.5-inc1'\nre_prob: 0.25\nre_value: 'random'\nmixup: 0.8\n"
                    "cutmix: 1.0\ncolor_jitter: [0.4, 0.4, 0.4]\naug_repeats: 3\n")
    imported = import_config(path)
    assert dict(imported.overrides) == {"interpolation": "bicubic", "auto_augment": "randaug-m9-mstd0.5-inc1",
                                        "re_prob": 0.25, "re_value": "random", "mixup": 0.8, "cutmix": 1.0,
                                        "color_jitter": 0.4}
    fields = {f.path: f for f in imported.fields}
    assert fields["mixup"].use == PRESET and fields["aug_repeats"].use == NOT_MODELLED
    path.write_text(text + "color_jitter: [0.4, 0.2, 0.4]\n")
    with pytest.raises(ConfigError, match=r"color_jitter=\[0.4, 0.2, 0.4\].*one factor"):
        import_config(path)


def test_a_mindyolo_config_with_its_base_files_is_a_cell_of_the_mindyolo_adapter():
    pytest.importorskip("mindyolo", reason="the zoo extra is not installed: pip install -e '.[zoo]'")
    path = CONFIGS / "mindyolo" / "yolov8s.yaml"
    imported = import_config(path)
    assert (imported.workload, imported.preset, dict(imported.overrides)) == ("mindyolo:yolov8s", "full", {})
    assert dict(imported.knobs) == {"mode": "graph", "batch_size": 32, "amp_level": "O2", "sink": True,
                                    "workers": 8, "loss_scale": "dynamic"}
    fields = {f.path: f for f in imported.fields}
    assert set(fields) == set(flatten(load_yaml(path))) and len(fields) == len(imported.fields)
    assert [p for p, f in fields.items() if f.to == UNKNOWN] == []
    assert fields["network.width_multiple"].to == "workload=mindyolo:yolov8s"


def test_a_mindyolo_scale_msbench_has_no_adapter_for_is_one_line(tmp_path):
    pytest.importorskip("mindyolo", reason="the zoo extra is not installed: pip install -e '.[zoo]'")
    for name in ("yolov8-base.yaml", "hyp.yaml"):
        (tmp_path / name).write_text((CONFIGS / "mindyolo" / name).read_text())
    (tmp_path / "odd.yaml").write_text("__BASE__: ['./hyp.yaml', './yolov8-base.yaml']\nnetwork:\n"
                                       "  depth_multiple: 0.33\n  width_multiple: 0.40\n  max_channels: 1024\n")
    with pytest.raises(ConfigError, match="network.depth_multiple / width_multiple / max_channels"):
        import_config(tmp_path / "odd.yaml")


CHECK_CONFIGS = Path(__file__).resolve().parents[2] / "tools" / "independent_check" / "configs"


def test_qwen_1_counts_the_qkv_biases_its_config_type_implies() -> None:
    """QwenConfig has no qkv bias key, yet its attention is biased: the published 7,721,324,544 holds them."""
    imported = import_config(CHECK_CONFIGS / "qwen_7b_finetune_8k_fp16.yaml")
    assert imported.parameters == 7_721_324_544
    assert any("Q/K/V biases" in use.to for use in imported.fields if use.path == "model.model_config.type")


def test_a_per_stage_recompute_list_says_it_is_costed_as_full_recompute() -> None:
    imported = import_config(CHECK_CONFIGS / "glm4_9b_finetune_8k.yaml")
    assert imported.knobs["recompute"] == "full"
    line = next(use.to for use in imported.fields if use.path == "recompute_config.recompute")
    assert "per-stage layer list [6, 3, 2, 3]" in line and "over-states" in line


@pytest.mark.parametrize(("select", "knob", "says"), [
    (True, "selective", None),
    ([8, 4, 4, 1], "selective", None),                                # per-stage layer counts: Megatron's selective
    (["feed_forward\\.w1\\.matmul", "feed_forward\\.mul", "attention\\.flash attention"], "full", "over-states"),
    ({"feed_forward\\.mul": [20, 8], "feed_forward\\.w1\\.activation": [20, 8]}, "selective", "under-states"),
])
def test_an_op_level_select_recompute_is_costed_by_the_work_it_names(tmp_path, select, knob, says) -> None:
    """MindFormers' op-pattern select_recompute (its Llama2-13B tuning case lists nearly every MatMul of the block)
    is not msbench's attention-core selective recompute."""
    text = LLAMA2.read_text()
    assert "select_recompute" in text and "recompute_config" in text
    config = tmp_path / "llama2.yaml"
    lines = [line for line in text.splitlines() if not line.strip().startswith(("recompute:", "select_recompute:"))]
    at = next(i for i, line in enumerate(lines) if line.strip() == "recompute_config:")
    lines[at + 1:at + 1] = ["  recompute: False", f"  select_recompute: {json.dumps(select)}"]
    config.write_text("\n".join(lines) + "\n")
    imported = import_config(config)
    assert imported.knobs["recompute"] == knob
    line = next(use.to for use in imported.fields if use.path.startswith("recompute_config.select_recompute"))
    assert (says in line) if says else ("op-level" not in line)
