"""`model:<profile>`: the device model as a Target. Runs inline (it is a pure function of cached data).

The only impure steps sit here, around the pure `predict`: extracting the cell's real op graph
(cached), applying fusion, fetching the measured host cost (cached), and optionally the real
tiny-preset accuracy (cached by the real-target side).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping

from hardware.mindspore.accuracy import ACCURACY_SEEDS
from hardware.model.opgraph import OpGraph
from hardware.model.predict import Prediction, predict
from hardware.model.profile import HardwareProfile, load_profile
from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.settings import Settings


@dataclass(frozen=True)
class CellPrediction:
    prediction: Prediction
    graph: OpGraph
    profile: HardwareProfile


def fusion_enabled(settings: Settings, profile: HardwareProfile) -> bool:
    """Graph-kernel fusion happens with graph_kernel=true, or with jit O1 on Ascend. MindSpore's CPU
    backend accepts jit O1 without fusing (reference mindspore-2.10-cpu.md §1)."""
    if settings.mode != "graph":
        return False
    return settings.graph_kernel or (settings.jit_level == "O1" and profile.profile.kind == "npu")


def cell_graph(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
               profile: HardwareProfile) -> OpGraph:
    """The cell's real op graph, fused as the profile's compiler would, with its epoch length in `meta`."""
    from hardware.model.fusion import apply_fusion
    from hardware.model.graph import extract_graph
    from workloads.registry import get_workload
    from workloads.train_step import steps_per_epoch

    graph = extract_graph(workload, preset, overrides, settings)
    if fusion_enabled(settings, profile):
        graph = apply_fusion(graph)
    epoch = steps_per_epoch(get_workload(workload).preset(preset, overrides), settings)
    return dataclasses.replace(graph, meta={**graph.meta, "steps_per_epoch": epoch})


def predict_cell(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
                 profile_name: str) -> CellPrediction:
    from hardware.model.host_cost import host_cost

    profile = load_profile(profile_name)
    graph = cell_graph(workload, preset, overrides, settings, profile)
    host = host_cost(workload, preset, overrides, settings)
    return CellPrediction(predict(graph, settings, profile, host), graph, profile)


def prediction_metrics(pred: Mapping[str, Any]) -> Metrics:
    """Record metrics from `Prediction.to_dict()` (the rounded figures, so records are deterministic)."""
    return Metrics(
        step_time_s=pred["step_time_s"], throughput=pred["throughput"],
        throughput_per_device=pred["throughput_per_device"], peak_memory_bytes=pred["peak_memory_bytes"],
        peak_memory_source="model", peak_memory_detail=dict(pred["memory"]),
        memory_capacity_bytes=pred["memory_capacity_bytes"], oom=pred["oom"], bound=pred["bound"],
        mfu=pred["mfu"], breakdown=dict(pred["breakdown"]), extra={"detail": dict(pred["detail"])},
    )


class ModelTarget:
    """Predicts a cell on one hardware profile; `accuracy=True` adds the real tiny-preset accuracy."""

    isolate = False
    # Predictions are pure and take milliseconds; a cold cell waits on child processes (graph compile,
    # host-cost probe, tiny-preset training) that overlap on two cores: two such children at once took
    # 37.7 s against 47.9 s one after the other here. More would oversubscribe their OpenMP threads.
    parallel_cells = min(2, os.cpu_count() or 1)

    def __init__(self, profile: str, accuracy: bool = False, accuracy_seeds: int = ACCURACY_SEEDS) -> None:
        self.profile = load_profile(profile)          # an unknown name is a ConfigError now, not per cell
        self.name = f"model:{profile}"
        self.accuracy = accuracy
        self.accuracy_seeds = accuracy_seeds          # tiny-preset runs per accuracy (msbench matrix key)

    def supports(self, cell: Cell) -> str | None:
        if cell.settings.sink and not self.profile.launch.supports_sink:
            return f"dataset sink is not available on {self.profile.name} (MindSpore sinks only on Ascend/GPU)"
        return None

    def run(self, cell: Cell) -> Record:
        result = predict_cell(cell.workload, cell.preset, cell.overrides, cell.settings, self.profile.name)
        metrics = prediction_metrics(result.prediction.to_dict())
        status, reason = "ok", None
        if result.prediction.oom:
            status = "oom"
            reason = (f"predicted peak {result.prediction.peak_memory_bytes / 2**30:.2f} GiB exceeds the "
                      f"{result.prediction.memory_capacity_bytes / 2**30:.2f} GiB usable on {self.profile.name}")
        record = Record(cell=cell, status=status, reason=reason, metrics=metrics, profile_hash=self.profile.digest)
        if self.accuracy:
            from hardware.mindspore.target import add_accuracy   # real tiny-preset numerics, cached, in a child

            add_accuracy(record, self.accuracy_seeds)
        return record
