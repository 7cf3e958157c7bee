"""`msbench validate --profile ascend910a|ascend910b`: the published-runs file's schema and the command's
machinery, on synthetic predictions (no graph extraction here)."""

from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.model.predict import predict  # noqa: E402
from hardware.model.profile import load_profile  # noqa: E402
from hardware.validation import report  # noqa: E402
from hardware.validation.cases import PUBLISHED, SPLITS, UNITS, load_catalogue, split_of  # noqa: E402
from hardware.validation.report import evaluate, render  # noqa: E402
from model_graphs import FakeHost, mlp_step  # noqa: E402
from msbench.cli import main  # noqa: E402
from msbench.errors import ConfigError  # noqa: E402
from msbench.settings import DEFAULTS  # noqa: E402

CATALOGUE = load_catalogue()


@dataclass(frozen=True)
class Stub:
    step_time_s: float
    oom: bool = False
    bound: str = "compute"
    peak_memory_bytes: int = 2**30
    memory_capacity_bytes: int = 32 * 2**30


def scaled(factor: float, per_case: dict[str, float] | None = None, oom: frozenset[str] = frozenset()):
    """A predictor that answers `factor` x the published step (or a per-case factor)."""
    def predictor(case):
        return Stub(case.published_step_s * (per_case or {}).get(case.id, factor), oom=case.id in oom)
    return predictor


def test_every_case_names_its_source_and_settings():
    assert len(CATALOGUE.expressible()) >= 15
    assert {c.profile for c in CATALOGUE.expressible()} >= {"ascend910a", "ascend910b"}
    assert {c.workload for c in CATALOGUE.expressible()} >= {"resnet50", "yolov5s", "yolov8n", "yolov8s", "bert-base",
                                                              "bert-large", "transformer-large"}
    for case in CATALOGUE.cases:
        assert case.source.startswith("https://"), case.id
        assert case.published and case.note and case.mindspore and case.chip, case.id
        if case.repo:
            assert re.fullmatch(r"[0-9a-f]{40}", case.commit) and case.commit in case.source, case.id
            assert case.path in case.source, case.id
        if case.expressible:
            assert set(case.knobs) <= set(DEFAULTS), case.id            # every settings key is a real knob
            assert case.samples_per_step > 0 and case.published_step_s > 0
        else:
            assert case.why, case.id
    assert any(p.differs == "devices" for p in CATALOGUE.pairs) and any(p.differs == "profile" for p in CATALOGUE.pairs)


def test_units_convert_both_ways():
    img = CATALOGUE.case("docs0.5-resnet50-b256-8p")
    assert UNITS[img.unit] == "throughput" and img.samples_per_step == 256 * 8
    assert img.published_step_s == pytest.approx(2048 / 16600)
    assert img.in_unit(img.published_step_s) == pytest.approx(16600)
    ms = CATALOGUE.case("mindcv-resnet50-b32-8p-910")
    assert ms.published_step_s == pytest.approx(0.03141) and ms.in_unit(0.05) == pytest.approx(50.0)


CASE = '''
[[case]]
id = "{id}"
expressible = true
source = "https://example.org/{id}"
split = "{split}"
chip = "Ascend 910"
mindspore = "2.3.1"
figure = 30.0
unit = "ms/step"
published = {{ cards = 8 }}
note = "n"
profile = "ascend910a"
workload = "resnet50"
knobs = {knobs}
'''
GOOD = '{ mode = "graph", batch_size = 32, devices = 8 }'
PAIR_SOURCE = "https://example.org/pair"            # a pair's two cases come from one source


def case_text(id: str, knobs: str, source: str = "") -> str:
    """One case of the template, in the part its source falls in."""
    source = source or f"https://example.org/{id}"
    return CASE.format(id=id, knobs=knobs, split=split_of(source)).replace(f"https://example.org/{id}", source)


@pytest.mark.parametrize("text, field", [
    (case_text("a", '{ mode = "graph", batch_size = 32, devices = 8, warp_speed = 9 }'), "knob"),
    (case_text("a", '{ mode = "graph", batch_size = 32 }'), "knobs"),
    (case_text("a", GOOD).replace('source = "https://example.org/a"\n', ""), "source"),
    (case_text("a", GOOD).replace('published = { cards = 8 }', "published = {}"), "published"),
    (case_text("a", GOOD).replace('"ms/step"', '"fps"'), "unit"),
    (case_text("a", GOOD).replace('"ms/step"', '"tokens/s"'), "unit"),
    (case_text("a", GOOD).replace("expressible = true", "expressible = false"), "why"),
    (case_text("a", GOOD) + case_text("a", GOOD), "id"),
    (case_text("a", GOOD, PAIR_SOURCE) + case_text("b", '{ mode = "graph", batch_size = 64, devices = 1 }', PAIR_SOURCE)
     + '[[pair]]\na = "a"\nb = "b"\ndiffers = "devices"\n', "differs"),
])
def test_loader_refuses_what_a_reader_relies_on(tmp_path, text, field):
    path = tmp_path / "published.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert err.value.field == field


def test_a_case_may_name_a_zoo_network_and_nothing_else_outside_the_builtins(tmp_path):
    """mindcv's README rows are predicted through the zoo adapter (`mindcv:<model>`)."""
    path = tmp_path / "published.toml"
    path.write_text(case_text("a", GOOD).replace('workload = "resnet50"', 'workload = "mindcv:densenet121"'))
    assert load_catalogue(path).cases[0].workload == "mindcv:densenet121"
    path.write_text(case_text("a", GOOD).replace('workload = "resnet50"', 'workload = "resnet18"'))
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert err.value.field == "workload" and "<zoo>:<model> (mindcv, mindyolo)" in str(err.value)


def test_the_mindcv_readme_rows_of_both_chips_are_chip_pairs_of_one_recipe():
    """Every network whose mindcv README (2.3.1) has a 910 and a 910* row with a recipe msbench can express is a pair."""
    rows = [c for c in CATALOGUE.cases if c.repo == "mindspore-lab/mindcv" and c.mindspore == "2.3.1" and c.expressible]
    pairs = {(p.a, p.b) for p in CATALOGUE.pairs if p.differs == "profile"}
    by_path: dict[str, list] = {}
    for case in rows:
        by_path.setdefault((case.path, case.workload), []).append(case)
    assert len(by_path) >= 30
    for (path, workload), cases in by_path.items():
        a, b = sorted(cases, key=lambda c: c.profile)
        assert (a.profile, b.profile) == ("ascend910a", "ascend910b") and (a.id, b.id) in pairs, path
        assert a.knobs == b.knobs and a.overrides == b.overrides and a.split == b.split == split_of(a.source)


def test_a_pair_that_differs_in_one_knob_loads(tmp_path):
    path = tmp_path / "published.toml"
    path.write_text(case_text("a", GOOD, PAIR_SOURCE) + case_text("b", '{ mode = "graph", batch_size = 32, devices = 1 }', PAIR_SOURCE)
                    + '[[pair]]\na = "b"\nb = "a"\ndiffers = "devices"\n')
    assert load_catalogue(path).pairs[0].differs == "devices"


def test_errors_medians_and_ratios_follow_the_predictions():
    data = evaluate(CATALOGUE, "ascend910a", scaled(1.2, {"docs0.5-resnet50-b256-8p": 2.0},
                                                     oom=frozenset({"docs0.5-bert-large-b96-8p"})), part="locked")
    rows = {r["id"]: r for r in data["cases"]}
    assert set(rows) == {c.id for c in CATALOGUE.part("locked").expressible("ascend910a")}
    assert rows["docs0.5-resnet50-b256-8p"]["step_error"] == pytest.approx(1.0)
    assert rows["docs0.5-resnet50-b256-8p"]["predicted"] == pytest.approx(16600 / 2.0)       # img/s, converted
    s = data["summary"]
    assert s["step_median_abs_error"] == pytest.approx(statistics.median(abs(r["step_error"]) for r in rows.values()))
    assert s["oom_verdicts_right"] == s["oom_verdicts"] - 1 and not rows["docs0.5-bert-large-b96-8p"]["oom_verdict_right"]
    pairs = {(p["a"], p["b"]): p for p in data["pairs"]}
    scaling = pairs[("docs0.5-resnet50-b256-1p", "docs0.5-resnet50-b256-8p")]
    assert scaling["published_ratio"] == pytest.approx(16600 / 2115)
    assert scaling["predicted_ratio"] == pytest.approx(16600 / 2115 * 1.2 / 2.0)
    assert scaling["same_side"] and not scaling["within_goal"]
    chip = pairs[("mindcv-resnet50-b32-8p-910", "mindcv-resnet50-b32-8p-910b")]   # reported under both chips
    assert chip["predicted_ratio"] == pytest.approx(chip["published_ratio"]) and chip["within_goal"]
    text = render(data)
    assert "docs0.5-resnet50-b256-8p" in text and "+100%" in text and "WRONG" in text and "THOR" in text


def test_a_ratio_on_the_wrong_side_of_one_is_flagged():
    # predicted 910B 3x slower than 910A where the source has it 1.23x faster
    data = evaluate(CATALOGUE, "ascend910b", scaled(1.0, {"mindyolo-yolov5s-b32-8p-910b": 3.0}))
    pair = next(p for p in data["pairs"] if p["b"] == "mindyolo-yolov5s-b32-8p-910b")
    assert pair["published_ratio"] > 1 > pair["predicted_ratio"] and pair["same_side"] is False


def test_a_failed_prediction_is_a_row_not_a_crash():
    def predictor(case):
        if case.workload == "yolov8s":
            raise RuntimeError("graph extraction failed\nlong tail")
        return Stub(case.published_step_s)

    data = evaluate(CATALOGUE, "ascend910b", predictor)
    failed = [r for r in data["cases"] if r["failed"]]
    assert {r["workload"] for r in failed} == {"yolov8s"} and failed[0]["failed"] == "RuntimeError: graph extraction failed"
    assert data["summary"]["failed"] == len(failed) and data["summary"]["predicted"] == len(data["cases"]) - len(failed)
    pair = next(p for p in data["pairs"] if "yolov8s" in p["a"])
    assert pair["predicted_ratio"] is None and pair["same_side"] is None


def test_the_machinery_on_real_predictions_of_a_synthetic_graph():
    """The real `predict` on each case's settings and profile, with a hand-built graph: errors follow it."""
    def predictor(case):
        return predict(mlp_step(case.settings.batch_size, width=256), case.settings, load_profile(case.profile), FakeHost())

    data = evaluate(CATALOGUE, "ascend910b", predictor)
    for row in data["cases"]:
        assert row["step_error"] == pytest.approx(row["predicted_step_s"] / row["published_step_s"] - 1)
        assert row["oom_verdict_right"] is True


def test_cli_prints_the_table_and_writes_json(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(report, "model_predictor", scaled(0.5))
    assert main(["validate", "--profile", "ascend910b", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "mindyolo-yolov8n-b16-8p-910b" in text and "-50%" in text and "median |step-time error| 50.0%" in text
    saved = json.loads((tmp_path / "validation-report-ascend910b.json").read_text())
    assert saved["summary"]["step_median_abs_error"] == pytest.approx(0.5)
    assert main(["validate", "--profile", "ascend910a", "--out", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"] == "ascend910a"


def test_cli_refuses_a_chip_without_validation_data(tmp_path, capsys):
    assert main(["validate", "--profile", "atlas300i-duo", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "atlas300i-duo" in err and "ascend910a" in err


def test_the_file_is_the_one_the_command_reads():
    assert PUBLISHED == Path(report.__file__).with_name("published.toml") and PUBLISHED.is_file()


def test_a_skipped_case_stays_in_the_table_marked():
    calls = []

    def predictor(case):
        calls.append(case.id)
        return Stub(case.published_step_s)

    data = evaluate(CATALOGUE, "ascend910a", predictor, skip=["docs0.5-bert-large-b96-1p"], part="locked")
    row = next(r for r in data["cases"] if r["id"] == "docs0.5-bert-large-b96-1p")
    assert row["failed"] == report.SKIPPED and "docs0.5-bert-large-b96-1p" not in calls
    assert data["summary"]["skipped"] == 1 and data["summary"]["failed"] == 0
    pair = next(p for p in data["pairs"] if p["a"] == "docs0.5-bert-large-b96-1p")
    assert pair["predicted_ratio"] is None
    assert "skipped (--skip)" in render(data) and "(1 skipped)" in render(data)
    with pytest.raises(ConfigError, match="--skip"):
        evaluate(CATALOGUE, "ascend910a", predictor, skip=["mindyolo-yolov5s-b32-8p-910b-typo"], part="locked")


def test_every_case_is_in_the_part_of_its_source_and_no_pair_straddles():
    for case in CATALOGUE.cases:
        assert case.split in SPLITS and case.split == split_of(case.source), case.id
    for pair in CATALOGUE.pairs:
        assert CATALOGUE.case(pair.a).split == CATALOGUE.case(pair.b).split == pair.split, (pair.a, pair.b)
    by_source: dict[str, set[str]] = {}
    for case in CATALOGUE.cases:
        by_source.setdefault(case.source, set()).add(case.split)
    assert all(len(parts) == 1 for parts in by_source.values())
    dev, locked = CATALOGUE.part("dev"), CATALOGUE.part("locked")
    assert dev.expressible() and locked.expressible()
    assert len(dev.cases) + len(locked.cases) == len(CATALOGUE.cases)
    assert len(dev.pairs) + len(locked.pairs) == len(CATALOGUE.pairs)


def test_the_loader_refuses_a_moved_case_and_a_straddling_pair(tmp_path):
    path = tmp_path / "published.toml"
    text = case_text("a", GOOD)
    other = "locked" if split_of("https://example.org/a") == "dev" else "dev"
    path.write_text(text.replace(f'split = "{split_of("https://example.org/a")}"', f'split = "{other}"'))
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert err.value.field == "split"
    dev = next(f"https://example.org/s{i}" for i in range(100) if split_of(f"https://example.org/s{i}") == "dev")
    locked = next(f"https://example.org/s{i}" for i in range(100) if split_of(f"https://example.org/s{i}") == "locked")
    path.write_text(case_text("a", GOOD, dev) + case_text("b", '{ mode = "graph", batch_size = 32, devices = 1 }', locked)
                    + '[[pair]]\na = "a"\nb = "b"\ndiffers = "devices"\n')
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert err.value.field == "split"


def test_validate_reports_the_dev_part_and_the_locked_part_only_when_asked(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(report, "model_predictor", scaled(1.0))
    for profile in ("ascend910a", "ascend910b"):
        assert main(["validate", "--profile", profile, "--out", str(tmp_path), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["part"] == "dev"
        assert {r["id"] for r in data["cases"]} == {c.id for c in CATALOGUE.part("dev").expressible(profile)}
        assert main(["validate", "--profile", profile, "--locked", "--out", str(tmp_path), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["part"] == "locked"
        assert {r["id"] for r in data["cases"]} == {c.id for c in CATALOGUE.part("locked").expressible(profile)}


def test_a_same_script_sink_pair_loads_and_is_reported(tmp_path):
    """Issue 41: a sink on/off pair of one source is a one-knob pair like any other (none is in the file yet)."""
    path = tmp_path / "published.toml"
    sunk = '{ mode = "graph", batch_size = 32, devices = 8, sink = true }'
    path.write_text(case_text("a", GOOD, PAIR_SOURCE) + case_text("b", sunk, PAIR_SOURCE)
                    + '[[pair]]\na = "a"\nb = "b"\ndiffers = "sink"\n')
    catalogue = load_catalogue(path)
    assert catalogue.pairs[0].differs == "sink"
    part = catalogue.pairs[0].split
    data = evaluate(catalogue, "ascend910a", scaled(1.0, {"b": 0.5}), part=part)
    pair = data["pairs"][0]
    assert pair["published_ratio"] == pytest.approx(1.0) and pair["predicted_ratio"] == pytest.approx(2.0)
    assert "b / a | sink" in render(data)
