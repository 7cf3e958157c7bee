"""`msbench measure`: one cell through the runner, printed as JSON or a table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from msbench.cli import main


def test_measure_json_of_an_unsupported_cell(scratch, capsys):
    code = main(["measure", "resnet50", "--set", "mode=graph", "--set", "sink=true", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert code == 0
    assert record["status"] == "unsupported" and "sink=true" in record["reason"]
    assert record["cell"]["target"] == "mindspore:cpu" and record["cell"]["settings"]["sink"] is True


def test_measure_table(scratch, capsys):
    assert main(["measure", "resnet50", "--set", "optimizer=lars"]) == 0
    out = capsys.readouterr().out
    assert "unsupported" in out and "LARSUpdate" in out


def test_measure_refuses_bad_knobs(scratch, capsys):
    assert main(["measure", "resnet50", "--set", "amp_level=O9"]) == 2
    assert "amp_level='O9' is not allowed" in capsys.readouterr().err


@pytest.mark.slow
def test_measure_runs_a_real_cell(scratch, private_cache, capsys, monkeypatch):
    for name, value in (("TIME_BUDGET_S", "0.5"), ("MIN_STEPS", "4"), ("WARMUP_STEPS", "1"),
                        ("MEMORY_PROFILE_STEPS", "0"), ("PROCESSES", "2"), ("MAX_PROCESSES", "2")):
        monkeypatch.setenv(f"MSBENCH_MEASURE_{name}", value)
    # the scratch cwd must not hide this checkout from the measured children (see conftest.toy_env)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                      os.environ.get("PYTHONPATH", "")]))
    assert main(["measure", "resnet50", "--set", "mode=graph", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "ok", record["reason"]
    m = record["metrics"]
    assert m["step_time_s"] > 0 and m["peak_memory_source"] == "rss"    # no profiler steps: RSS headline
    assert m["throughput"] == pytest.approx(m["extra"]["global_samples_per_step"] / m["step_time_s"])
    assert len(m["step_time_stats"]["process_medians"]) == 2 and len(m["extra"]["processes"]) == 2


def test_ratio_line_calls_an_effect_only_outside_both_intervals():
    from msbench.commands.measure import ratio_line
    from msbench.cell import Cell
    from msbench.records import Metrics, Record, StepStats
    from msbench.settings import Settings

    def rec(median, rel):
        stats = StepStats(median=median, iqr=0.0, cv=0.0, ci95_rel=rel, samples=[median] * 6,
                          process_medians=[median] * 3)
        return Record(cell=Cell(workload="resnet50", preset="tiny", settings=Settings()), status="ok",
                      metrics=Metrics(step_time_s=median, step_time_stats=stats))

    assert "B slower" in ratio_line(rec(1.0, 0.01), rec(1.2, 0.01))
    assert "no effect shown" in ratio_line(rec(1.0, 0.1), rec(1.05, 0.1))
    assert "not comparable" in ratio_line(rec(1.0, 0.01), Record(cell=rec(1, 0).cell, status="failed"))
