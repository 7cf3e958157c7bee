"""`model:<profile>`: the device model as a Target. Runs inline (it is a pure function of cached data).

Each cell is resolved once (hardware/model/plan.py) and predicted by the one prediction path
(hardware/model/outcome.py); this class adds what a run asks for beyond the prediction: the compile
of a matrix's graphs up front, per-op profiles, trace files and the real tiny-preset accuracy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from hardware.mindspore.accuracy import ACCURACY_SEEDS, accuracy_key, not_run_reason, seed_cells, training_cost
from hardware.mindspore.backend import host_cpus
from hardware.model.graph import (compile_missing_graphs, graph_plan, mindspore_version, missing_graphs,
                                  underived_follow_up, workload_sources)
from hardware.model.llm.predict import cell_parts
from hardware.model.outcome import predict_plan, refusal_before
from hardware.model.plan import CellPlan, resolve
from hardware.model.profile import load_profile
from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.freshness import files_digest, fingerprint, recorded_options
from msbench.records import Record


from msbench.resources import suite_path
from hardware.op_times import predicted_op_profile
from hardware.model.predict import canonical
from hardware.model.trace import UNTRACEABLE, trace_title, write_trace
from hardware.mindspore.target import add_accuracy

MODEL_DIR, MINDSPORE_DIR, CALIBRATION_DIR = (suite_path(f"hardware/{d}") for d in ("model", "mindspore", "calibration"))
SPINE = (suite_path("hardware/capabilities.py"), suite_path("hardware/op_times.py"), suite_path("msbench/settings.py"))


class ModelTarget:
    """Predicts a cell on one hardware profile; `accuracy=True` adds the real tiny-preset accuracy."""

    isolate = False
    # Predictions are pure and take milliseconds; a cold cell waits on child processes (graph compile,
    # host-cost probe, tiny-preset training) that overlap on two cores: two such children at once took
    # 37.7 s against 47.9 s one after the other here. More would oversubscribe their OpenMP threads.
    parallel_cells = min(2, os.cpu_count() or 1)
    # A warm prediction is Python, not a wait: `parallel_cells` of them run in forked processes (threads took
    # as long as one: the nightly's 108 predictions, about 45 s either way on two cores).
    python_bound = True
    # Accuracy trainings at once, one op thread each (msbench/accuracy_phase.py): a training's Python data
    # pipeline and evaluation leave a second op thread of the same child idle much of the time.
    accuracy_lanes = min(2, os.cpu_count() or 1)

    def __init__(self, profile: str, accuracy: bool = False, trace_dir: str | None = None,
                 accuracy_seeds: int = ACCURACY_SEEDS, profile_dir: str | None = None,
                 accuracy_knobs: tuple[str, ...] | None = None, defer_accuracy: bool = False) -> None:
        self.profile = load_profile(profile)          # an unknown name is a ConfigError now, not per cell
        self.name = f"model:{profile}"
        self.accuracy = accuracy
        self.trace_dir = trace_dir                    # `msbench run --trace-dir`: one trace per cell
        self.accuracy_seeds = accuracy_seeds          # tiny-preset runs per accuracy (msbench matrix key)
        # `profile = true` in a matrix: the record gets the predicted per-op times (metrics.op_profile), the
        # model's side of the real target's Profiler summary; nothing is written under profile_dir
        self.op_profile = profile_dir is not None
        self.accuracy_knobs = accuracy_knobs          # matrix key: numerics knobs that get accuracy runs
        # the runner predicts every cell first and calls add_accuracy afterwards (msbench/accuracy_phase.py)
        self.defer_accuracy = defer_accuracy
        self._fingerprints: dict[str, str] = {}       # workload -> fingerprint (see `fingerprint`)
        self._plans: dict[str, CellPlan] = {}         # cell id -> its plan

    @property
    def kind(self) -> str:
        """The capability table's kind: `model:npu` or `model:cpu`, by the profile."""
        return f"model:{self.profile.profile.kind}"

    def plan(self, cell: Cell) -> CellPlan:
        """The cell resolved on this target's profile, once per cell (supports, prepare and run share it)."""
        if cell.id not in self._plans:
            self._plans[cell.id] = resolve(cell, self.profile, accuracy=self.accuracy)
        return self._plans[cell.id]

    def supports(self, cell: Cell) -> str | None:
        return refusal_before(self.plan(cell))

    def prepare(self, cells: Sequence[Cell], announce: Callable[[str], None]) -> None:
        """Compile every graph the cells will read before any of them runs (an LLM's parts, or the
        training steps at the reference batches and depths): a matrix's cold graphs are then shared by two
        extraction children in all, a chunk of compiles each, not started one or two per cold cell, each
        importing MindSpore (~2 s of a ~13 s compile), and both children stay busy to the matrix's last
        graph. A cell whose graphs cannot be planned (a layout its model cannot be split by, a bad preset
        override) is left to report that itself when it runs."""
        jobs, graphs, planned = [], [], 0
        for cell in cells:
            try:
                plan = self.plan(cell)
                if refusal_before(plan):
                    continue
                if plan.llm:
                    jobs += cell_parts(plan).planned()
                else:
                    graphs.append(graph_plan(cell.workload, cell.preset, cell.overrides, cell.settings))
                    jobs += graphs[-1].compiles()
            except ConfigError:
                continue
            planned += 1
        missing = missing_graphs(jobs)
        if missing:
            derived = any(plan.second_references() for plan in graphs)
            announce(f"compiling the {len(missing)} graphs that {planned} cells read, first"
                     + (" (and any whose batch rules their template does not give, as they are found)" if derived else ""))
            compile_missing_graphs(missing, lambda done, total: announce(f"compiled {done} of {total} graphs"),
                                   follow_up=underived_follow_up(graphs))

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
        sources = [*MODEL_DIR.glob("*.py"), *MODEL_DIR.glob("llm/*.py"), *SPINE, *workload_sources(cell.workload)]
        if self.accuracy:
            sources += MINDSPORE_DIR.glob("*.py")
        calibration = files_digest([CALIBRATION_DIR]) if CALIBRATION_DIR.exists() else None
        return fingerprint("model", files_digest(sources), self.profile.digest, calibration, mindspore_version(),
                           recorded_options(self.accuracy, self.accuracy_seeds, self.accuracy_knobs, self.op_profile))

    def run(self, cell: Cell) -> Record:
        outcome = predict_plan(self.plan(cell))
        record, result = outcome.record, outcome.result
        if result is None:
            return record
        if self.op_profile and result.prediction.parts is not None:
            parts = result.prediction.parts
            record.metrics.op_profile = canonical(predicted_op_profile(parts.kernels, parts.slots))
        if self.trace_dir:
            if result.prediction.parts is None:
                record.metrics.extra["trace"] = UNTRACEABLE        # the record says why its trace file is missing
            else:
                write_trace(Path(self.trace_dir) / f"{cell.id}.trace.json", result.prediction, trace_title(cell))
        if self.accuracy and not self.defer_accuracy:
            self.add_accuracy(record)
        return record

    def accuracy_group(self, record: Record) -> str | None:
        """The trainings the record's accuracy reads (its first seed's cache key): records with equal groups
        share them, so the accuracy phase trains each group once. None when the record trains nothing."""
        if not_run_reason(record.cell.settings, self.accuracy_knobs):
            return None
        try:
            return accuracy_key(seed_cells(record.cell, 1)[0])
        except ConfigError:
            return None

    def accuracy_cost(self, record: Record) -> float:
        """An estimate of the CPU seconds the record's trainings take (the phase starts the dearest first)."""
        return training_cost(record.cell, self.accuracy_seeds)

    def add_accuracy(self, record: Record, lanes: int = 1) -> None:
        """The real tiny-preset accuracy of the record's numerics (cached, trained in a child process that
        takes 1/`lanes` of the host's CPUs: the phase runs `lanes` trainings at once)."""
        add_accuracy(record, self.accuracy_seeds, self.accuracy_knobs, threads=None if lanes <= 1 else
                     max(1, host_cpus() // lanes))

