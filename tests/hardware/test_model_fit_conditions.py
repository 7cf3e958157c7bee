"""The cpu-profile fitter refuses a run whose cells were measured under very different conditions."""

from __future__ import annotations

from hardware.model.fit import main
from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.settings import Settings
from msbench.store import RunStore


def test_fit_refuses_mixed_conditions(tmp_path, capsys):
    store = RunStore(tmp_path / "run.jsonl")
    for seed, load in ((1, 0.1), (2, 5.0)):
        cell = Cell(workload="resnet50", preset="tiny", settings=Settings(seed=seed), label=f"seed={seed}",
                    target="mindspore:cpu")
        store.append(Record(cell=cell, status="ok", metrics=Metrics(step_time_s=0.01, extra={"conditions": {
            "cores": 2, "load_before": [load, load, load], "others_during": 0.0}})))
    assert main([str(store.path)]) == 2
    err = capsys.readouterr().err
    assert "resnet50 seed=2 against resnet50 seed=1: one ran overloaded (load 5.00 > 2 cores)" in err
