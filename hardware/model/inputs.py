"""The impure inputs of a planned cell's prediction: its extracted op graph (cached, fused as the plan's
compile mode says) and its calibrated host cost (hardware/calibration/host_cost.json, never a probe)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hardware.capabilities import PIPELINE_MODES, knobs_changing
from hardware.model.fusion import apply_fusion
from hardware.model.graph import extract_graph
from hardware.model.host_cost import host_cost
from hardware.model.opgraph import OpGraph
from hardware.model.pipeline_modes import HostWithModes, pipeline_modes
from hardware.model.plan import CellPlan
from msbench.settings import DEFAULTS

MODE_KNOBS = knobs_changing(PIPELINE_MODES)      # the capability table's knobs that read pipeline_modes.json


def plan_graph(plan: CellPlan, compile_missing: bool = True) -> OpGraph:
    """The cell's real op graph with its epoch length in `meta` (`compile_missing=False`: from the cache
    only, see extract_graph)."""
    cell = plan.cell
    graph = extract_graph(cell.workload, cell.preset, cell.overrides, cell.settings, compile_missing)
    if plan.compile.graph_kernel_fusion:
        graph = apply_fusion(graph)
    return dataclasses.replace(graph, meta={**graph.meta, "steps_per_epoch": plan.steps_per_epoch,
                                            "ragged_last_batch": plan.ragged_last_batch})


def plan_host(plan: CellPlan) -> Any:
    """The calibrated host cost of the entry that measured the cell's pipeline, with the pipeline's
    calibrated modes when a knob that reads them is set."""
    assert plan.calibration is not None, "an LLM composition reads no host cost"
    source, source_preset, source_overrides = plan.calibration
    host = host_cost(source, source_preset, source_overrides, plan.settings.data_format)
    if all(getattr(plan.settings, k) == DEFAULTS[k] for k in MODE_KNOBS):
        return host
    return HostWithModes(host, pipeline_modes(source, source_preset, plan.settings.data_format))
