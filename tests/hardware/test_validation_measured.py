"""`msbench validate --measured FILE`: a user's own runs (TOML, CSV or TimeMonitor log) tabled like the
published cases, on synthetic predictions (no graph extraction here) and one real, cheap refusal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.validation import report  # noqa: E402
from hardware.validation.measured import evaluate_measured  # noqa: E402
from hardware.validation.measured_file import LogRun, read_measured  # noqa: E402
from msbench.cli import main  # noqa: E402
from msbench.errors import ConfigError  # noqa: E402
from test_validation_published import Stub  # noqa: E402

TOML = '''
[[runs]]
id = "r1"
workload = "resnet50"
preset = "tiny"
step_time_ms = 250.0
[runs.settings]
mode = "graph"
batch_size = 32
devices = 8
amp_level = "O2"

[[runs]]
id = "r2"
workload = "bert-base"
samples_per_s = 1600
profile = "ascend910a"
notes = "eight cards"
[runs.settings]
mode = "graph"
batch_size = 16
devices = 8
sink = true
'''
CSV = '''id,workload,preset,settings,profile,step_time_ms,samples_per_s,notes
r1,resnet50,tiny,mode=graph;batch_size=32;devices=8;amp_level=O2,,250,,
r2,bert-base,,mode=graph; batch_size=16; devices=8; sink=true,ascend910a,,1600,eight cards
'''
# MindSpore 2.x TimeMonitor lines, with the LossMonitor and an eval epoch between them: the first training
# epoch (compilation) and the eval epoch must not count; the median of 250, 240, 260 is 250.
LOG = '''epoch: 1 step: 100, loss is 6.91
Train epoch time: 90000.123 ms, per step time: 900.001 ms
Train epoch time: 25000.000 ms, per step time: 250.000 ms (data time: 1.500 ms)
Eval epoch time: 5000.000 ms, per step time: 5.000 ms
Train epoch time: 24000.000 ms, per step time: 240.000 ms
epoch time: 26000.000 ms, per step time: 260.000 ms
'''
R1_LOG = LogRun("resnet50", "tiny", ("mode=graph", "batch_size=32", "devices=8", "amp_level=O2"))


def by_batch(case):
    """A prediction that depends on the resolved settings and preset, so a run resolved differently differs."""
    s = case.settings
    return Stub(0.001 * s.batch_size * (2 if s.sink else 1) * (3 if case.preset == "tiny" else 1),
                oom=s.amp_level == "O2")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def rows(path: Path, log_run: LogRun | None = None) -> list[dict]:
    return evaluate_measured(read_measured(path, "ascend910b", log_run), "ascend910b", by_batch)["cases"]


def test_toml_csv_and_log_give_the_same_rows(tmp_path):
    toml_rows = rows(write(tmp_path, "runs.toml", TOML))
    assert rows(write(tmp_path, "runs.csv", CSV)) == toml_rows
    assert rows(write(tmp_path, "r1.log", LOG), R1_LOG) == toml_rows[:1]
    r1, r2 = toml_rows
    assert (r1["published_step_s"], r1["predicted_step_s"]) == (pytest.approx(0.25), pytest.approx(0.096))
    assert r1["step_error"] == pytest.approx(0.096 / 0.25 - 1) and r1["oom_verdict_right"] is False
    assert r2["profile"] == "ascend910a" and r2["predicted_step_s"] == pytest.approx(0.032)   # preset full, sink
    assert r2["published_step_s"] == pytest.approx(16 * 8 / 1600)          # samples/s over all devices
    assert r2["predicted"] == pytest.approx(16 * 8 / 0.032)                # shown in the run's own unit


def test_the_log_says_which_epochs_it_used(tmp_path):
    case, = read_measured(write(tmp_path, "r1.log", LOG), "ascend910b", R1_LOG)
    assert case.figure == 250.0 and "epochs 2-4" in case.note and "left out" in case.note


def test_the_table_and_json_report_the_median_over_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(report, "model_predictor", by_batch)
    path = write(tmp_path, "runs.toml", TOML)
    assert main(["validate", "--profile", "ascend910b", "--measured", str(path), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| case | chip (MindSpore) | measured | model | step err |" in text
    assert "| r1 | ascend910b (-) | 250.0 ms/step | 96.0 ms/step | -62% |" in text
    assert "(measured runs): 2 of 2 cases predicted; median |step-time error| 60.8%" in text   # |-0.616|, |-0.6|
    assert main(["validate", "--profile", "ascend910b", "--measured", str(path), "--out", str(tmp_path),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == "measured" and data["measured"] == str(path)
    assert data["summary"]["predicted"] == 2 and data["summary"]["step_median_abs_error"] == pytest.approx(0.608)
    assert json.loads((tmp_path / "validation-report-ascend910b-measured-runs.json").read_text()) == data


def test_a_refused_run_is_a_row(tmp_path):
    """The real prediction path: the device model refuses the dataset cache before any graph is built."""
    refused = TOML.replace('sink = true', 'cache = true\ndata_format = "mindrecord"')
    cases = read_measured(write(tmp_path, "runs.toml", refused), "ascend910b")
    data = evaluate_measured(cases[1:], "ascend910b")
    row, = data["cases"]
    assert row["id"] == "r2" and row["predicted"] is None and row["failed"].startswith("ModelRefusal: unsupported")
    assert "cache=true" in row["failed"] and data["summary"]["failed"] == 1
    assert "failed: ModelRefusal" in report.render(data)


def test_a_setting_refused_while_the_cell_resolves_is_a_row(monkeypatch, tmp_path):
    def predictor(case):
        if case.id == "r2":
            raise ConfigError("pipeline_stages", 2, "1 (no parallel plan outside the LLM stack)")
        return by_batch(case)

    monkeypatch.setattr(report, "model_predictor", predictor)
    data = evaluate_measured(read_measured(write(tmp_path, "runs.toml", TOML), "ascend910b"), "ascend910b")
    assert [r["failed"] for r in data["cases"]][0] is None
    assert data["cases"][1]["failed"].startswith("ModelRefusal: pipeline_stages=2 is not allowed")
    assert data["summary"]["predicted"] == 1


@pytest.mark.parametrize("name, text, where, field", [
    ("runs.toml", TOML.replace("batch_size = 16", "batch_size = -4"), "runs.toml:13 run 2", "batch_size"),
    ("runs.toml", TOML.replace("samples_per_s = 1600", "samples_per_s = 1600\nstep_time_ms = 80"),
     "runs.toml:13 run 2", "step_time_ms/samples_per_s"),
    ("runs.toml", TOML.replace("step_time_ms = 250.0", "step_time_ms = 0"), "runs.toml:2 run 1", "step_time_ms"),
    ("runs.toml", TOML.replace("devices = 8\namp", "amp"), "runs.toml:2 run 1", "settings"),
    ("runs.toml", TOML.replace('profile = "ascend910a"', 'profile = "ascend999"'), "runs.toml:13 run 2", "profile"),
    ("runs.toml", TOML.replace('preset = "tiny"', 'preset = "huge"'), "runs.toml:2 run 1", "preset"),
    ("runs.toml", TOML.replace("notes =", "note ="), "runs.toml:13 run 2", "key"),
    ("runs.toml", TOML.replace("[[runs]]", "[[run]]"), "runs.toml:19", "toml"),     # [runs.settings] twice
    ("runs.toml", 'title = "ours"\n' + TOML, "runs.toml", "table"),
    ("runs.csv", CSV.replace("sink=true", "sink=maybe"), "runs.csv:3 row 2", "sink"),
    ("runs.csv", CSV.replace(",,1600,", ",,fast,"), "runs.csv:3 row 2", "samples_per_s"),
    ("runs.csv", CSV.replace("notes", "remarks"), "runs.csv:1", "column"),
    ("r1.log", LOG.replace("per step time: 240.000", "per step time: 2x0"), "r1.log:5", "per step time"),
    ("r1.log", "\n".join(LOG.splitlines()[:2]), "r1.log", "epochs"),
])
def test_a_malformed_file_is_one_line_naming_where_and_what(tmp_path, capsys, name, text, where, field):
    path = write(tmp_path, name, text)
    log = ["--workload", "resnet50", "--preset", "tiny", *(f"--set={s}" for s in R1_LOG.sets)] if name.endswith(".log") else []
    assert main(["validate", "--profile", "ascend910b", "--measured", str(path), "--out", str(tmp_path), *log]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{tmp_path}/{where}:" in err and f"{field}=" in err and "allowed:" in err
    with pytest.raises(ConfigError) as raised:
        read_measured(path, "ascend910b", R1_LOG if name.endswith(".log") else None)
    assert raised.value.field == field


@pytest.mark.parametrize("argv, field", [
    (["--measured", "{toml}", "--workload", "resnet50"], "--workload"),      # a TOML states its own runs
    (["--measured", "{log}"], "--workload"),                                # a log does not
    (["--workload", "resnet50"], "--measured"),
    (["--measured", "{toml}", "--locked"], "--locked"),
    (["--measured", "{log}", "--workload", "resnet50", "--set", "warp=9"], "knob"),
])
def test_options_that_do_not_fit_the_file_are_refused(tmp_path, capsys, argv, field):
    files = {"toml": write(tmp_path, "runs.toml", TOML), "log": write(tmp_path, "r1.log", LOG)}
    argv = [a.format(**files) for a in argv]
    assert main(["validate", "--profile", "ascend910b", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{field}=" in err


def test_the_documented_examples_read_and_agree(tmp_path):
    """docs/validation.md's TOML and CSV examples are files this reader accepts, and the same run."""
    text = (Path(__file__).resolve().parents[2] / "docs/validation.md").read_text()
    section = text.split("## Validate against your own runs", 1)[1]
    blocks = {kind: section.split(f"```{kind}\n", 1)[1].split("```", 1)[0] for kind in ("toml", "csv")}
    toml_rows = rows(write(tmp_path, "doc.toml", blocks["toml"]))
    assert rows(write(tmp_path, "doc.csv", blocks["csv"])) == toml_rows and toml_rows[0]["mindspore"] == "2.3.1"
