"""The cpu-profile fitter refuses a run whose cells were measured under very different conditions."""

from __future__ import annotations

from hardware.calibration.fit import main
from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.settings import Settings
from msbench.store import RunStore


def record(store, seed, others, load=0.1, cpu="AMD EPYC"):
    cell = Cell(workload="resnet50", preset="tiny", settings=Settings(seed=seed), label=f"seed={seed}",
                target="mindspore:cpu")
    store.append(Record(cell=cell, status="ok", provenance={"cpu": {"model": cpu, "cores": 2}},
                        metrics=Metrics(step_time_s=0.01, extra={"conditions": {
                            "cores": 2, "load_before": [load, load, load], "others_during": others}})))


def test_fit_refuses_mixed_conditions(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    record(store, 1, 0.0)
    record(store, 2, 0.9)
    assert main([str(store.path)]) == 2
    err = capsys.readouterr().err
    assert "resnet50 seed=2 against resnet50 seed=1: one ran overloaded (others kept 1.80 of 2 cores busy" in err


def test_fit_refuses_a_run_taken_under_load_even_when_uniform(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    record(store, 1, 0.3)
    record(store, 2, 0.35)
    assert main([str(store.path)]) == 2
    assert "2 of 2 cells were not measured on a quiet machine, first resnet50 seed=1: others kept 0.60" \
        in capsys.readouterr().err


def test_fit_refuses_records_without_the_others_share(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    for seed in (1, 2):
        cell = Cell(workload="resnet50", preset="tiny", settings=Settings(seed=seed), label=f"seed={seed}",
                    target="mindspore:cpu")
        store.append(Record(cell=cell, status="ok", metrics=Metrics(step_time_s=0.01, extra={"conditions": {
            "cores": 2, "load_before": [0.1, 0.1, 0.1]}})))
    assert main([str(store.path)]) == 2
    assert "the others' CPU share during it was not measured" in capsys.readouterr().err


def test_accepting_the_conditions_needs_a_reason_and_says_what_was_accepted(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    record(store, 1, 0.3)
    assert main([str(store.path), "--accept-conditions", " "]) == 2          # no reason: refused, usage
    assert "usage" in capsys.readouterr().err


def test_fit_refuses_a_run_measured_on_two_cpu_models_even_when_accepted(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    record(store, 1, 0.0)
    record(store, 2, 0.0, cpu="Intel(R) Xeon(R) Processor")
    assert main([str(store.path), "--accept-conditions", "resumed on another machine"]) == 2
    assert "measured on 2 CPU models (AMD EPYC, Intel(R) Xeon(R) Processor); a profile is fitted to one" \
        in capsys.readouterr().err
