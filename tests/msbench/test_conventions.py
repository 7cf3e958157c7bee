"""The mapping conventions: a source's own terms (dataset class, MindSpore release) become knobs in one place,
for the published validation cases and for config import alike."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from hardware.validation.cases import load_catalogue
from msbench.conventions import READERS, data_format_of, data_format_or_python, graph_jit_level
from msbench.errors import ConfigError
from msbench.importers import import_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))
from test_validation_published import GOOD, case_text  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


@pytest.mark.parametrize("reader, fmt", [("ImageFolderDatasetV2", "mindrecord"), ("imagefolderdataset", "mindrecord"),
                                         ("TFRecordDataset", "mindrecord"), ("MindDataset", "mindrecord"),
                                         ("Cifar10Dataset", "mindrecord"), ("GeneratorDataset", "generator")])
def test_each_dataset_class_stands_for_one_source(reader, fmt):
    assert data_format_of(reader, "here") == fmt == data_format_or_python(reader)


def test_an_unlisted_class_is_one_line_for_a_case_and_a_python_source_for_a_config():
    with pytest.raises(ConfigError) as err:
        data_format_of("CocoDataset", "published.toml case x")
    assert err.value.field == "reader" and err.value.value == "CocoDataset"
    assert all(name in err.value.allowed for r in READERS for name in r.names)
    assert data_format_or_python("CommonDataLoader") == "generator"


@pytest.mark.parametrize("release, level", [("0.5.0-beta", "O2"), ("1.3.0", "O2"), ("1.5", "O2"), ("2.3.1", None),
                                            ("2.4 (MindFormers r1.3.0)", None), ("unknown", None)])
def test_the_ge_era_fixes_the_graph_jit_level(release, level):
    assert graph_jit_level(release) == level


def test_a_case_gets_its_knobs_from_its_reader_and_release(tmp_path):
    path = tmp_path / "published.toml"
    text = case_text("a", GOOD).replace('workload = "resnet50"', 'workload = "resnet50"\nreader = "ImageFolderDataset"')
    path.write_text(text.replace('mindspore = "2.3.1"', 'mindspore = "1.3.0"'))
    case = load_catalogue(path).cases[0]
    assert case.knobs["data_format"] == "mindrecord" and case.knobs["jit_level"] == "O2"
    path.write_text(text)                                     # a 2.x release fixes no jit level
    assert "jit_level" not in load_catalogue(path).cases[0].knobs


@pytest.mark.parametrize("knobs, release", [('{ mode = "graph", batch_size = 32, devices = 8, data_format = "mindrecord" }', "2.3.1"),
                                            ('{ mode = "graph", batch_size = 32, devices = 8, jit_level = "O2" }', "1.3.0")])
def test_a_case_that_states_a_derived_knob_is_refused(tmp_path, knobs, release):
    path = tmp_path / "published.toml"
    text = case_text("a", knobs).replace('workload = "resnet50"', 'workload = "resnet50"\nreader = "ImageFolderDataset"')
    path.write_text(text.replace('mindspore = "2.3.1"', f'mindspore = "{release}"'))
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert err.value.field == "knobs" and "msbench.conventions" in str(err.value)


def test_every_shipped_pipeline_case_states_its_reader_not_its_knob():
    raw = tomllib.loads((Path(__file__).resolve().parents[2] / "hardware" / "validation" / "published.toml").read_text())
    pipelines = [c for c in raw["case"] if c["expressible"] and not c["workload"].startswith("llama")]
    assert len(pipelines) >= 20
    assert all(c.get("reader") and "data_format" not in c["knobs"] for c in pipelines)
    loaded = {c.id: c for c in load_catalogue().expressible()}
    assert all(loaded[c["id"]].knobs["data_format"] == data_format_of(c["reader"], c["id"]) for c in pipelines)


@pytest.mark.parametrize("loader, fmt", [("TFRecordDataset", "mindrecord"), ("MindDataset", "mindrecord"),
                                         ("CommonDataLoader", "generator")])
def test_config_import_maps_the_loader_class_by_the_same_table(tmp_path, loader, fmt):
    data = yaml.safe_load((CONFIGS / "mindformers_qwen1_5_7b.yaml").read_text())
    data["train_dataset"]["data_loader"]["type"] = loader
    path = tmp_path / "qwen.yaml"
    path.write_text(yaml.safe_dump(data))
    use = next(f for f in import_config(path).fields if f.path == "train_dataset.data_loader.type")
    assert use.to.split()[0] == f"data_format={fmt}"       # read as that source (the LLM composition then leaves it out)
