"""Tracked metrics of every matrix cell, one asv parameter combination per (workload, variant, target).

asv reads every number as lower-is-better: its regression detection watches seconds_per_sample,
peak_memory and accuracy_drop; throughput and accuracy_delta are for the graphs, and
`msbench compare` reads each metric in its own direction.
"""

from __future__ import annotations

from benchmarks import PARAM_NAMES, Table, cell_metrics, evaluate_matrix, matrix_params
from msbench.tracked import TRACKED


class MatrixCells:
    """Shared by the classes below: asv keys setup_cache by its source line, so the matrix runs once."""

    version = "1"
    param_names = PARAM_NAMES
    params = matrix_params()
    timeout = 120
    needs: tuple[str, ...] = ()

    def setup_cache(self) -> Table:
        return evaluate_matrix()

    setup_cache.timeout = 3600

    def setup(self, table: Table, workload: str, variant: str, target: str) -> None:
        self.row = cell_metrics(table, workload, variant, target, self.needs)


class Performance(MatrixCells):
    version = "1"
    needs = ("throughput", "seconds_per_sample", "peak_memory")

    def track_throughput(self, table: Table, workload: str, variant: str, target: str) -> float:
        return self.row["throughput"]

    track_throughput.unit = TRACKED["throughput"].unit

    def track_seconds_per_sample(self, table: Table, workload: str, variant: str, target: str) -> float:
        return self.row["seconds_per_sample"]

    track_seconds_per_sample.unit = TRACKED["seconds_per_sample"].unit

    def track_peak_memory(self, table: Table, workload: str, variant: str, target: str) -> float:
        return self.row["peak_memory"]

    track_peak_memory.unit = TRACKED["peak_memory"].unit


class Accuracy(MatrixCells):
    """Cells of a matrix with `accuracy = true`; delta and drop are against the matrix's baseline cell."""

    version = "1"
    needs = ("accuracy_delta", "accuracy_drop")

    def track_accuracy_delta(self, table: Table, workload: str, variant: str, target: str) -> float:
        return self.row["accuracy_delta"]

    track_accuracy_delta.unit = TRACKED["accuracy_delta"].unit

    def track_accuracy_drop(self, table: Table, workload: str, variant: str, target: str) -> float:
        return self.row["accuracy_drop"]

    track_accuracy_drop.unit = TRACKED["accuracy_drop"].unit
