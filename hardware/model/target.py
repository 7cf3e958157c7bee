"""`model:<profile>`: the device model as a Target. Runs inline (it is a pure function of cached data).

The only impure steps sit here, around the pure `predict`: extracting the cell's real op graph
(cached), applying fusion, reading the calibrated host cost (hardware/calibration/host_cost.json), and optionally the real
tiny-preset accuracy (cached by the real-target side).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hardware.capabilities import Facts, refusal
from hardware.mindspore.accuracy import ACCURACY_SEEDS
from hardware.model.compute import has_flash_kernel
from hardware.model.opgraph import OpGraph
from hardware.model.predict import Prediction, predict
from hardware.model.profile import HardwareProfile, load_profile
from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.records import Metrics, Record
from msbench.scenario import scenario_refusal
from msbench.settings import DEFAULTS, Settings


from msbench.resources import suite_path
MODEL_DIR, MINDSPORE_DIR, CALIBRATION_DIR = (suite_path(f"hardware/{d}") for d in ("model", "mindspore", "calibration"))
SPINE = (suite_path("hardware/capabilities.py"), suite_path("msbench/settings.py"))


@dataclass(frozen=True)
class CellPrediction:
    prediction: Prediction
    graph: OpGraph
    profile: HardwareProfile
    host: Any = None               # the host cost the prediction read (with its pipeline modes, if any)


def fusion_enabled(settings: Settings, profile: HardwareProfile) -> bool:
    """Graph-kernel fusion happens with graph_kernel=true, or with jit O1 on Ascend. MindSpore's CPU
    backend accepts jit O1 without fusing (reference mindspore-2.10-cpu.md §1)."""
    if settings.mode != "graph":
        return False
    return settings.graph_kernel or (settings.jit_level == "O1" and profile.profile.kind == "npu")


def cell_graph(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
               profile: HardwareProfile, compile_missing: bool = True) -> OpGraph:
    """The cell's real op graph, fused as the profile's compiler would, with its epoch length in `meta`
    (`compile_missing=False`: from the cache only, see extract_graph)."""
    from hardware.model.fusion import apply_fusion
    from hardware.model.graph import extract_graph
    from workloads.registry import get_workload
    from workloads.pipeline import ragged_last_batch
    from workloads.train_step import steps_per_epoch

    graph = extract_graph(workload, preset, overrides, settings, compile_missing)
    if fusion_enabled(settings, profile):
        graph = apply_fusion(graph)
    spec = get_workload(workload).preset(preset, overrides)
    return dataclasses.replace(graph, meta={**graph.meta, "steps_per_epoch": steps_per_epoch(spec, settings),
                                            "ragged_last_batch": ragged_last_batch(spec, settings)})


MODE_KNOBS = ("python_multiprocessing", "augment_device", "drop_remainder")   # read pipeline_modes.json


def cell_host(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings) -> Any:
    """The calibrated host cost (the file, no probe), with the pipeline's calibrated modes when a knob that reads
    them is set; a zoo adapter feeding a built-in pipeline reads that pipeline's entries."""
    from hardware.model.host_cost import host_cost
    from hardware.model.pipeline_modes import HostWithModes, pipeline_modes
    from workloads.registry import calibration_entry

    source, source_preset, source_overrides = calibration_entry(workload, preset, overrides or {})
    host = host_cost(source, source_preset, source_overrides, settings.data_format)
    if all(getattr(settings, k) == DEFAULTS[k] for k in MODE_KNOBS):
        return host
    return HostWithModes(host, pipeline_modes(source, source_preset, settings.data_format))


def predict_cell(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
                 profile_name: str, *, scenario: str = "train") -> CellPrediction:
    profile = load_profile(profile_name)
    if scenario == "train":
        llm = llm_cell(workload, preset, overrides, settings, profile)
        if llm is not None:
            return llm
    host = cell_host(workload, preset, overrides, settings)
    graph = cell_graph(workload, preset, overrides, settings, profile)
    if scenario == "inference":
        from hardware.model.inference import predict_inference

        return CellPrediction(predict_inference(graph, settings, profile, host), graph, profile, host)
    return CellPrediction(predict(graph, settings, profile, host), graph, profile, host)


def llm_composed(cell: Cell) -> bool:
    """Whether the cell's workload is a decoder-only LLM the device model composes (hardware/model/llm)."""
    from hardware.model.llm.predict import is_llm_preset
    from workloads.registry import get_workload

    return is_llm_preset(get_workload(cell.workload).preset(cell.preset, cell.overrides))


def llm_cell(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
             profile: HardwareProfile) -> CellPrediction | None:
    """A decoder-only LLM is composed from one extracted block (hardware/model/llm); None for other workloads."""
    from hardware.model.llm.predict import is_llm_preset, predict_llm_cell
    from workloads.registry import get_workload

    if not is_llm_preset(get_workload(workload).preset(preset, overrides)):
        return None
    prediction, graphs = predict_llm_cell(workload, preset, overrides, settings, profile)
    return CellPrediction(prediction, graphs.block, profile)


def prediction_metrics(pred: Mapping[str, Any]) -> Metrics:
    """Record metrics from `Prediction.to_dict()` (the rounded figures, so records are deterministic)."""
    return Metrics(
        step_time_s=pred["step_time_s"], throughput=pred["throughput"],
        throughput_per_device=pred["throughput_per_device"], peak_memory_bytes=pred["peak_memory_bytes"],
        peak_memory_source="model", peak_memory_detail=dict(pred["memory"]),
        memory_capacity_bytes=pred["memory_capacity_bytes"], oom=pred["oom"], bound=pred["bound"],
        mfu=pred["mfu"], breakdown=dict(pred["breakdown"]), extra={"detail": dict(pred["detail"])},
    )


def prediction_vision_ops(result: CellPrediction) -> bool | None:
    """Whether the cell's pipeline has deterministic vision ops (known from its calibrated modes)."""
    from hardware.model.pipeline_modes import modes_of

    modes = modes_of(result.host)
    return None if modes is None else bool(modes.vision_shares)


class ModelTarget:
    """Predicts a cell on one hardware profile; `accuracy=True` adds the real tiny-preset accuracy."""

    isolate = False
    # Predictions are pure and take milliseconds; a cold cell waits on child processes (graph compile,
    # host-cost probe, tiny-preset training) that overlap on two cores: two such children at once took
    # 37.7 s against 47.9 s one after the other here. More would oversubscribe their OpenMP threads.
    parallel_cells = min(2, os.cpu_count() or 1)

    def __init__(self, profile: str, accuracy: bool = False, trace_dir: str | None = None,
                 accuracy_seeds: int = ACCURACY_SEEDS, profile_dir: str | None = None,
                 accuracy_knobs: tuple[str, ...] | None = None) -> None:
        self.profile = load_profile(profile)          # an unknown name is a ConfigError now, not per cell
        self.name = f"model:{profile}"
        self.accuracy = accuracy
        self.trace_dir = trace_dir                    # `msbench run --trace-dir`: one trace per cell
        self.accuracy_seeds = accuracy_seeds          # tiny-preset runs per accuracy (msbench matrix key)
        # `profile = true` in a matrix: the record gets the predicted per-op times (metrics.op_profile), the
        # model's side of the real target's Profiler summary; nothing is written under profile_dir
        self.op_profile = profile_dir is not None
        self.accuracy_knobs = accuracy_knobs          # matrix key: numerics knobs that get accuracy runs
        self._fingerprints: dict[str, str] = {}       # workload -> fingerprint (see `fingerprint`)

    @property
    def kind(self) -> str:
        """The capability table's kind: `model:npu` or `model:cpu`, by the profile."""
        return f"model:{self.profile.profile.kind}"

    def facts(self, marked_blocks: int | None = None, ragged: bool | None = None,
              vision_ops: bool | None = None, llm: bool = False) -> Facts:
        return Facts(ragged_last_batch=ragged, device_vision_ops=vision_ops, accuracy=self.accuracy,
                     profile_sinks=self.profile.launch.supports_sink, host_is_device=self.profile.host.shares_device,
                     marked_blocks=marked_blocks, usable_gib=self.profile.memory.usable_gib,
                     fragmentation=self.profile.memory.fragmentation, llm_composition=llm,
                     flash_kernel=has_flash_kernel(self.profile))

    def supports(self, cell: Cell) -> str | None:
        if cell.scenario == "inference" and llm_composed(cell):
            return ("scenario=inference: the device model composes a decoder-only LLM's training step from one "
                    "block; a forward-only LLM prediction is not built")
        return scenario_refusal(cell.settings, cell.scenario) or refusal(cell.settings, self.kind,
                                                                          self.facts(llm=llm_composed(cell)))

    def prepare(self, cells: Sequence[Cell], announce: Callable[[str], None]) -> None:
        """Compile every graph the cells will read before any of them runs (an LLM's parts, or the
        training steps at the reference batches and depths): a matrix's cold graphs are then shared by two
        extraction children in all, a chunk of compiles each, not started one or two per cold cell, each
        importing MindSpore (~2 s of a ~13 s compile), and both children stay busy to the matrix's last
        graph. A cell whose graphs cannot be planned (a layout its model cannot be split by, a bad preset
        override) is left to report that itself when it runs."""
        from hardware.model.graph import compile_missing_graphs, graph_plan, missing_graphs
        from hardware.model.llm.predict import cell_parts

        jobs, planned = [], 0
        for cell in cells:
            if self.supports(cell):
                continue
            try:
                jobs += (cell_parts(cell.workload, cell.preset, cell.overrides, cell.settings).planned()
                         if llm_composed(cell) else
                         graph_plan(cell.workload, cell.preset, cell.overrides, cell.settings).compiles())
            except ConfigError:
                continue
            planned += 1
        missing = missing_graphs(jobs)
        if missing:
            announce(f"compiling the {len(missing)} graphs that {planned} cells read, first")
            compile_missing_graphs(missing)

    def fingerprint(self, cell: Cell) -> str:
        """What determines this target's numbers for the cell: the device model's sources, the capability
        table and settings rules, the workload's sources, the profile, every calibration file, MindSpore's
        version; with accuracy also the real target's sources (the accuracy run). Only the workload varies
        between a target's cells, so it is hashed once per workload (the files as the run found them):
        hashing ~100 files per cell was 29 of the 70 s of a warm 2,404-cell run."""
        if cell.workload not in self._fingerprints:
            self._fingerprints[cell.workload] = self._fingerprint(cell)
        return self._fingerprints[cell.workload]

    def _fingerprint(self, cell: Cell) -> str:
        from hardware.model.graph import mindspore_version, workload_sources
        from msbench.freshness import files_digest, fingerprint, recorded_options

        sources = [*MODEL_DIR.glob("*.py"), *MODEL_DIR.glob("llm/*.py"), *SPINE, *workload_sources(cell.workload)]
        if self.accuracy:
            sources += MINDSPORE_DIR.glob("*.py")
        calibration = files_digest([CALIBRATION_DIR]) if CALIBRATION_DIR.exists() else None
        return fingerprint("model", files_digest(sources), self.profile.digest, calibration, mindspore_version(),
                           recorded_options(self.accuracy, self.accuracy_seeds, self.accuracy_knobs, self.op_profile))

    def run(self, cell: Cell) -> Record:
        result = predict_cell(cell.workload, cell.preset, cell.overrides, cell.settings, self.profile.name,
                              scenario=cell.scenario)
        meta = result.graph.meta
        marked = meta.get("recomputed_blocks")
        reason = refusal(cell.settings, self.kind, self.facts(marked if isinstance(marked, int) else None,
                                                              meta.get("ragged_last_batch"),
                                                              prediction_vision_ops(result), llm=llm_composed(cell)))
        if reason:     # known only once the graph is extracted, as on the real target once the step is built
            return Record(cell=cell, status="unsupported", reason=reason, profile_hash=self.profile.digest)
        metrics = prediction_metrics(result.prediction.to_dict())
        if cell.scenario == "inference":
            metrics.latency_s = {"p50": metrics.step_time_s}     # a prediction has no spread: its one value
        if self.op_profile and result.prediction.parts is not None:
            from hardware.model.op_times import predicted_op_profile
            from hardware.model.predict import canonical

            parts = result.prediction.parts
            metrics.op_profile = canonical(predicted_op_profile(parts.kernels, parts.slots))
        if self.trace_dir:
            from hardware.model.trace import UNTRACEABLE, trace_title, write_trace

            if result.prediction.parts is None:
                metrics.extra["trace"] = UNTRACEABLE        # the record says why its trace file is missing
            else:
                write_trace(Path(self.trace_dir) / f"{cell.id}.trace.json", result.prediction, trace_title(cell))
        status, reason = "ok", None
        if result.prediction.oom:
            status = "oom"
            reason = (f"predicted peak {result.prediction.peak_memory_bytes / 2**30:.2f} GiB exceeds the "
                      f"{result.prediction.memory_capacity_bytes / 2**30:.2f} GiB usable on {self.profile.name}")
        record = Record(cell=cell, status=status, reason=reason, metrics=metrics, profile_hash=self.profile.digest)
        if self.accuracy:
            from hardware.mindspore.target import add_accuracy   # real tiny-preset numerics, cached, in a child

            add_accuracy(record, self.accuracy_seeds, self.accuracy_knobs)
        return record
