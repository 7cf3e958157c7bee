"""The Profiler-folder parser on hand-written folders whose headers follow the documentation
(tests/fixtures/profiler/README.md cites the pages): one summary shape for the CPU and Ascend layouts."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "msbench"))

from report_fixtures import record  # noqa: E402

from hardware.mindspore.profiler_files import ASCEND_SOURCE, CPU_SOURCE, op_summary  # noqa: E402
from msbench.report import perop  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures" / "profiler"


def run_dir(layout: str) -> Path:
    (folder,) = (FIXTURES / layout).iterdir()
    return folder


def test_the_cpu_files_give_time_per_step_per_op_type_and_per_kernel():
    summary = op_summary(run_dir("cpu"), steps=2)
    assert summary["source"] == CPU_SOURCE and summary["total_s"] == pytest.approx(0.020)
    assert summary["by_type"]["Conv2D"] == {"s": pytest.approx(0.015), "share": pytest.approx(0.75), "calls": 2.0}
    assert [k["type"] for k in summary["top_kernels"]] == ["Conv2D", "ReLU"]


def test_the_ascend_files_give_the_same_shape_with_a_type_on_two_cores_summed():
    summary = op_summary(run_dir("ascend"), steps=2)
    assert summary["source"] == ASCEND_SOURCE and summary["steps"] == 2
    assert summary["total_s"] == pytest.approx(2.5e-3)
    assert list(summary["by_type"]) == ["Conv2D", "MatMulV2", "Cast", "ReLU"]        # longest first
    assert summary["by_type"]["Conv2D"] == {"s": pytest.approx(1.5e-3), "share": pytest.approx(0.6), "calls": 2.0}
    assert summary["by_type"]["Cast"]["s"] == pytest.approx(0.25e-3) and summary["by_type"]["Cast"]["calls"] == 2.0
    # op_statistic's own Ratio(%) agrees with the recomputed share
    assert summary["by_type"]["ReLU"]["share"] == pytest.approx(0.10)
    assert summary["by_core"] == pytest.approx({"AI_CORE": 2.125e-3, "AI_CPU": 0.125e-3, "AI_VECTOR_CORE": 0.25e-3})
    top = summary["top_kernels"]
    assert [k["name"] for k in top[:3]] == ["Default/Conv2D-op1", "Default/Conv2D-op2", "Default/MatMulV2-op3"]
    assert top[0] == {"name": "Default/Conv2D-op1", "type": "Conv2D", "s": pytest.approx(0.8e-3),
                      "share": pytest.approx(0.32)}                 # two launches of 800 us over two steps
    assert sum(k["s"] for k in top) == pytest.approx(summary["total_s"])


def test_an_ascend_folder_without_kernel_details_still_has_its_op_types(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(run_dir("ascend"), folder)
    (folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    summary = op_summary(folder, steps=2)
    assert summary["total_s"] == pytest.approx(2.5e-3) and summary["top_kernels"] == []


def test_a_file_without_a_documented_column_gives_a_reason_naming_it(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(run_dir("ascend"), folder)
    statistic = folder / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    statistic.write_text(statistic.read_text().replace("Total Time(us)", "Total Time"))
    summary = op_summary(folder, steps=2)
    assert "by_type" not in summary and "'Total Time(us)'" in summary["reason"] and "op_statistic.csv" in summary["reason"]


def test_a_folder_with_neither_layout_says_what_is_read_and_that_gpu_is_not(tmp_path):
    (tmp_path / "gpu_run" / "profiler").mkdir(parents=True)
    summary = op_summary(tmp_path / "gpu_run", steps=2)
    assert "by_type" not in summary
    assert "op_statistic.csv" in summary["reason"] and "cpu_op_type_info" in summary["reason"]
    assert "GPU" in summary["reason"]


def test_the_reports_per_op_section_reads_an_ascend_summary_as_it_reads_a_cpu_one():
    measured = record(target="mindspore:ascend", thr=100.0)
    measured.metrics.op_profile = op_summary(run_dir("ascend"), steps=2)
    kernels = perop.top_kernels([measured])
    assert kernels["kernel"].tolist()[0] == "Default/Conv2D-op1" and kernels["ms_per_step"].iloc[0] == pytest.approx(0.8)
    table, notes = perop.by_op_type([measured])
    assert table["op_type"].tolist() == ["Conv2D", "MatMulV2", "Cast", "ReLU"]          # a tie goes by name
    assert table["measured_ms"].tolist() == pytest.approx([1.5, 0.5, 0.25, 0.25]) and table["predicted_ms"].isna().all()
    assert "no device-model profile is paired with this target" in notes[0]
