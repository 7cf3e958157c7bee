"""The metrics tracked per commit, each with its own direction, and how a cell is named across commits.

asv reads every number as lower-is-better, so its suite stores lower-is-better forms next to the
readable ones; `msbench compare` and the reports read the direction from here instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from msbench.cell import Cell
    from msbench.records import Metrics

ACCURACY_TOLERANCE_PP = 1.0   # accuracy change (pp) that counts as a change; the report uses the same default


@dataclass(frozen=True)
class TrackedMetric:
    """A metric as asv's `track_<name>` and `msbench compare` see it."""

    name: str
    unit: str                 # asv formats "seconds" and "bytes" itself
    higher_is_better: bool
    absolute: bool            # compared as a difference in its unit (pp), not as a ratio
    help: str


TRACKED: dict[str, TrackedMetric] = {m.name: m for m in (
    TrackedMetric("throughput", "samples/s", True, False, "global samples per second"),
    TrackedMetric("seconds_per_sample", "seconds", False, False, "1 / throughput: the lower-is-better form for asv"),
    TrackedMetric("peak_memory", "bytes", False, False, "peak device memory of a training step"),
    TrackedMetric("accuracy_delta", "pp", True, True, "accuracy minus the matrix baseline cell's, percentage points"),
    TrackedMetric("accuracy_drop", "pp", False, True, "accuracy lost against the baseline (0 when none): asv's form"),
)}


def tracked_values(metrics: "Metrics") -> dict[str, float | None]:
    """The tracked metrics of one record (None where the target did not report the input)."""
    throughput = metrics.throughput
    delta = metrics.accuracy_delta_pp
    return {
        "throughput": throughput,
        "seconds_per_sample": 1.0 / throughput if throughput else None,
        "peak_memory": float(metrics.peak_memory_bytes) if metrics.peak_memory_bytes is not None else None,
        "accuracy_delta": delta,
        "accuracy_drop": max(0.0, -delta) if delta is not None else None,
    }


def workload_key(cell: "Cell") -> str:
    """`resnet50` for the tiny preset, `resnet50@full` or `resnet50{width=32}` otherwise: stable, readable."""
    text = cell.workload if cell.preset == "tiny" else f"{cell.workload}@{cell.preset}"
    if cell.overrides:
        text += "{" + ",".join(f"{k}={v}" for k, v in sorted(cell.overrides.items())) + "}"
    return text


def cell_key(cell: "Cell") -> tuple[str, str, str]:
    """(workload, variant label, target): the asv parameters of a cell, also used to match records."""
    return workload_key(cell), cell.label, cell.target
