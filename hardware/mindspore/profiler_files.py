"""The per-op summary of one folder MindSpore 2.10's Profiler wrote, read from whichever backend's files it holds.

One summary shape for every backend (hardware/op_times.py), so `msbench report`'s per-op section
reads a CPU and an Ascend run alike. The layouts, each read by its documented column names:

- **CPU** (reference mindspore-2.10-cpu.md §4): `FRAMEWORK/cpu_op_type_info_<rank>.csv` (op_type,
  type_occurrences, total_compute_time in ms) and `FRAMEWORK/cpu_op_detail_info_<rank>.csv`
  (full_op_name, op_type, op_total_time(ms)), both summed over the profiled steps.
- **Ascend**: `ASCEND_PROFILER_OUTPUT/op_statistic.csv`, msprof's op_statistic copied by MindSpore
  (mindspore/profiler/analysis/viewer/ascend_integrate_viewer.py), columns per CANN's "op_statistic"
  page (https://www.hiascend.com/document/detail/en/canncommercial/800/devaids/profiling/atlasprofiling_16_0068.html):
  OP Type, Core Type, Count, Total Time(us), Ratio(%), one row per (op type, core type) over the
  profiled steps; and `ASCEND_PROFILER_OUTPUT/kernel_details.csv`, one row per launched kernel, its
  columns msprof's op_summary renamed by mindspore/profiler/analysis/viewer/ascend_kernel_details_viewer.py
  (Op Name -> Name, OP Type -> Type, Task Type -> Accelerator Core, Task Duration(us) -> Duration(us)),
  as CANN's "kernel_details.csv" page describes
  (https://www.hiascend.com/document/detail/en/canncommercial/850/devaids/profiling/atlasprofiling_16_1149.html).
- **GPU**: not read. MindSpore 2.10's GPU Profiler analyses nothing (platform/gpu_profiler.py: its
  `analyse()` only logs) and its documentation since 2.3 describes no GPU summary file, so there is no
  documented format to parse: such a folder's summary is a reason.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from hardware.op_times import op_profile

CPU_SOURCE = "mindspore.profiler (cpu_op_type_info, cpu_op_detail_info)"
ASCEND_SOURCE = "mindspore.profiler (ASCEND_PROFILER_OUTPUT op_statistic, kernel_details)"
GPU_REFUSAL = ("MindSpore 2.10's GPU Profiler writes no documented per-op summary (its analyse() does "
               "nothing), so GPU output is kept unparsed")


class MissingColumn(ValueError):
    """A Profiler file lacks a documented column: the summary says which, instead of guessing."""


def op_summary(run_dir: Path, steps: int) -> dict[str, Any]:
    """The per-op summary of one Profiler folder whose numbers cover `steps` steps, or a reason."""
    for types_glob, read in LAYOUTS:
        types = sorted(run_dir.glob(types_glob))
        if types:
            try:
                return {**read(run_dir, types[0], steps), "dir": str(run_dir)}
            except MissingColumn as exc:
                return {"reason": str(exc), "dir": str(run_dir)}
    return {"reason": f"no per-op summary in {run_dir}: read are the CPU's FRAMEWORK/cpu_op_type_info_*.csv and "
                      f"Ascend's ASCEND_PROFILER_OUTPUT/op_statistic.csv; {GPU_REFUSAL}", "dir": str(run_dir)}


def cpu_summary(run_dir: Path, types: Path, steps: int) -> dict[str, Any]:
    by_type = {row["op_type"]: (number(row, "total_compute_time", types) / 1e3 / steps,
                                number(row, "type_occurrences", types) / steps)
               for row in read_csv(types)}
    details = sorted(run_dir.glob("FRAMEWORK/cpu_op_detail_info_*.csv"))
    instances = [(text(row, "full_op_name", details[0]), text(row, "op_type", details[0]),
                  number(row, "op_total_time(ms)", details[0]) / 1e3 / steps)
                 for row in (read_csv(details[0]) if details else [])]
    return op_profile(by_type, instances, steps, CPU_SOURCE)


def ascend_summary(run_dir: Path, statistic: Path, steps: int) -> dict[str, Any]:
    """op_statistic gives the per-type totals (a type on two core types is summed); kernel_details the
    kernels, each name's launches summed over the steps, as the CPU's per-instance rows are."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    cores: dict[str, float] = defaultdict(float)
    for row in read_csv(statistic):
        us = number(row, "Total Time(us)", statistic)
        entry = totals[text(row, "OP Type", statistic)]
        entry[0] += us / 1e6 / steps
        entry[1] += number(row, "Count", statistic) / steps
        cores[text(row, "Core Type", statistic)] += us / 1e6 / steps
    kernels = statistic.parent / "kernel_details.csv"
    summary = op_profile({t: (s, n) for t, (s, n) in totals.items()},
                         kernel_instances(kernels, steps) if kernels.is_file() else [], steps, ASCEND_SOURCE)
    return {**summary, "by_core": dict(sorted(cores.items()))}


def kernel_instances(path: Path, steps: int) -> list[tuple[str, str, float]]:
    per_kernel: dict[tuple[str, str], float] = defaultdict(float)
    for row in read_csv(path):
        per_kernel[(text(row, "Name", path), text(row, "Type", path))] += number(row, "Duration(us)", path)
    return [(name, kind, us / 1e6 / steps) for (name, kind), us in per_kernel.items()]


def text(row: dict[str, str], column: str, path: Path) -> str:
    if column not in row or row[column] is None:
        raise MissingColumn(f"{path.name} has no column {column!r} (columns: {', '.join(c for c in row if c)})")
    return row[column].strip()


def number(row: dict[str, str], column: str, path: Path) -> float:
    value = text(row, column, path)
    try:
        return float(value)
    except ValueError:
        raise MissingColumn(f"{path.name}: column {column!r} holds {value!r}, not a number") from None


def read_csv(path: Path) -> Iterable[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


# (the file that identifies a backend's layout, its reader); Ascend first, as an Ascend run may also
# hold FRAMEWORK files of the host side
LAYOUTS: tuple[tuple[str, Callable[[Path, Path, int], dict[str, Any]]], ...] = (
    ("ASCEND_PROFILER_OUTPUT/op_statistic.csv", ascend_summary),
    ("FRAMEWORK/cpu_op_type_info_*.csv", cpu_summary),
)
