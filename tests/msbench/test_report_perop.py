"""Report sections 6 and 7: inference latency against batch size, and the per-op comparison of a
profiled real cell with the device model's prediction of the same cell."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import record  # noqa: E402

from hardware.op_times import op_profile  # noqa: E402
from msbench.report import latency, perop  # noqa: E402
from msbench.report.build import Options, build_report, training_frame  # noqa: E402
from msbench.report.load import load_inputs  # noqa: E402
from msbench.store import RunStore  # noqa: E402


def profiled(target: str, by_type: dict[str, float], **knobs) -> object:
    rec = record(target=target, thr=100.0, **knobs)
    slots = {t: s + 0.001 for t, s in by_type.items()} if target.startswith("model:") else None   # 1 ms dispatch
    rec.metrics.op_profile = op_profile({t: (s, 1.0) for t, s in by_type.items()},
                                        [(f"Default/{t}-op0", t, s) for t, s in by_type.items()], 1, "test", slots)
    return rec


def pair():
    measured = profiled("mindspore:cpu", {"Conv2D": 0.040, "BatchNorm": 0.010, "ReLU": 0.002})
    predicted = profiled("model:cpu", {"Conv2D": 0.030, "BatchNorm": 0.015, "MatMul": 0.001})
    return measured, predicted


def test_each_op_type_has_the_models_error_against_the_measurement():
    measured, predicted = pair()
    table, notes = perop.by_op_type([measured, predicted])
    assert not notes and list(table["op_type"][:3]) == ["Conv2D", "BatchNorm", "ReLU"]
    rows = table.set_index("op_type")
    assert rows.loc["Conv2D", "error"] == pytest.approx(0.030 / 0.040 - 1)
    assert rows.loc["BatchNorm", "error"] == pytest.approx(0.5)
    assert rows.loc["BatchNorm", "error_with_dispatch"] == pytest.approx(0.016 / 0.010 - 1)
    assert rows.loc["BatchNorm", "op_class"] == "reduction" and rows.loc["Conv2D", "op_class"] == "conv_forward"
    assert pd_isna(rows.loc["ReLU", "predicted_ms"]) and pd_isna(rows.loc["MatMul", "measured_ms"])
    assert rows.loc["Conv2D", "model_cell_id"] == predicted.cell_id


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_op_classes_sum_their_types_and_the_whole_op_time():
    classes = perop.by_op_class(list(pair())).set_index("op_class")
    assert classes.loc["all op time", "measured_ms"] == pytest.approx(52.0)
    assert classes.loc["all op time", "predicted_ms"] == pytest.approx(46.0)
    assert classes.loc["conv_forward", "error"] == pytest.approx(-0.25)
    assert classes.loc["all op time", "predicted_with_dispatch_ms"] == pytest.approx(49.0)


def test_a_profiled_cell_without_its_prediction_says_so():
    measured, _ = pair()
    other = profiled("model:cpu", {"Conv2D": 0.03}, amp_level="O2")       # a different cell
    table, notes = perop.by_op_type([measured, other])
    assert table["predicted_ms"].isna().all() and "no profiled model:cpu record of the same cell" in notes[0]


def inference(target: str, batch: int, p50: float) -> object:
    rec = record(target=target, thr=batch / p50, batch_size=batch)
    rec = replace(rec, cell=replace(rec.cell, scenario="inference"))
    rec.metrics.latency_s = {"p50": p50, "p90": p50 * 1.1, "p99": p50 * 1.3}
    rec.metrics.extra["batch_size"] = batch
    return rec


@pytest.mark.slow
def test_latency_rows_per_batch_and_the_report_keeps_inference_out_of_the_knob_sections(tmp_path):
    records = [inference("mindspore:cpu", b, 0.001 * b) for b in (4, 1, 16)] + list(pair())
    table = latency.latency_table(records)
    assert list(table["batch"]) == [1, 4, 16] and table["p99_ms"].iloc[0] == pytest.approx(1.3)
    store = RunStore(tmp_path / "r.jsonl")
    for rec in records:
        store.append(rec)
    sections = build_report(load_inputs([tmp_path / "r.jsonl"]), Options(plots=False))
    titles = [s.title for s in sections]
    assert "6. Inference latency" in titles and "7. Per-op profile" in titles
    lat = sections[titles.index("6. Inference latency")].tables[0].frame
    assert len(lat) == 3
    per_type = sections[titles.index("7. Per-op profile")].tables[1].frame
    assert set(per_type["op_type"]) == {"Conv2D", "BatchNorm", "ReLU", "MatMul"}
    frame = load_inputs([tmp_path / "r.jsonl"]).runs.frame
    assert set(training_frame(frame)["cell_id"]) == {r.cell_id for r in records[3:]}
    assert latency.latency_plot(lat) is not None
