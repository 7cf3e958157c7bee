"""The one way a device-model cell is predicted: refusals, then the model, then the record.

`msbench run` (ModelTarget), `msbench predict`, `msbench validate` (CPU and published) all call
`predict_plan`, so a cell one of them refuses is refused by all of them with the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from hardware.capabilities import refusal
from hardware.model.estimate_ends import estimate_ends
from hardware.model.inputs import plan_graph, plan_host
from hardware.model.opgraph import OpGraph
from hardware.model.pipeline_modes import modes_of
from hardware.model.plan import CellPlan, resolve
from hardware.model.predict import Prediction, predict
from hardware.model.profile import HardwareProfile
from msbench.cell import Cell
from msbench.errors import UserError
from msbench.records import Metrics, Record
from hardware.scenarios import scenario_refusal
from hardware.model.llm.predict import predict_llm_cell
from hardware.model.inference import predict_inference

LLM_INFERENCE = ("scenario=inference: the device model composes a decoder-only LLM's training step from one "
                 "block; a forward-only LLM prediction is not built")


@dataclass(frozen=True)
class CellPrediction:
    prediction: Prediction
    graph: OpGraph
    profile: HardwareProfile
    host: Any = None               # the host cost the prediction read (with its pipeline modes, if any)


@dataclass(frozen=True)
class Outcome:
    record: Record
    result: CellPrediction | None  # None when the cell was refused


class ModelRefusal(UserError):
    """A cell the device model does not predict (the capability table's reason)."""


def refusal_before(plan: CellPlan) -> str | None:
    """What is refused from the settings alone, before any graph is extracted."""
    if plan.cell.scenario == "inference" and plan.llm:
        return LLM_INFERENCE
    return scenario_refusal(plan.settings, plan.cell.scenario) or refusal(plan.settings, plan.kind, plan.facts())


def refusal_after(plan: CellPlan, result: CellPrediction) -> str | None:
    """What is refused once the graph is extracted, as on the real target once the step is built."""
    meta = result.graph.meta
    marked = meta.get("recomputed_blocks")
    modes = modes_of(result.host)
    return refusal(plan.settings, plan.kind, plan.facts(marked if isinstance(marked, int) else None,
                                                        None if modes is None else bool(modes.vision_shares),
                                                        meta.get("ragged_last_batch")))


def model_prediction(plan: CellPlan) -> CellPrediction:
    """The model's answer for a cell it predicts (no refusal checked): an LLM is composed from blocks."""
    if plan.llm:
        prediction, graphs = predict_llm_cell(plan)
        return CellPrediction(prediction, graphs.block, plan.profile)
    host = plan_host(plan)
    graph = plan_graph(plan)
    if plan.cell.scenario == "inference":
        return CellPrediction(predict_inference(graph, plan.settings, plan.profile, host), graph, plan.profile, host)
    return CellPrediction(predict(graph, plan.settings, plan.profile, host), graph, plan.profile, host)


def prediction_metrics(pred: Mapping[str, Any]) -> Metrics:
    """Record metrics from `Prediction.to_dict()` (the rounded figures, so records are deterministic)."""
    return Metrics(
        step_time_s=pred["step_time_s"], throughput=pred["throughput"],
        throughput_per_device=pred["throughput_per_device"], peak_memory_bytes=pred["peak_memory_bytes"],
        peak_memory_source="model", peak_memory_detail=dict(pred["memory"]),
        memory_capacity_bytes=pred["memory_capacity_bytes"], oom=pred["oom"], bound=pred["bound"],
        mfu=pred["mfu"], breakdown=dict(pred["breakdown"]), extra={"detail": dict(pred["detail"])},
    )


def oom_reason(prediction: Prediction, profile: HardwareProfile) -> str:
    return (f"predicted peak {prediction.peak_memory_bytes / 2**30:.2f} GiB exceeds the "
            f"{prediction.memory_capacity_bytes / 2**30:.2f} GiB usable on {profile.name}")


def predict_plan(plan: CellPlan, with_ends: bool = True) -> Outcome:
    """The cell's record: `unsupported` with the capability table's reason, else the prediction (`oom`
    when the predicted peak exceeds the profile's usable memory) with its estimates' range ends
    (`with_ends=False`: not predicted, for a command that answers one cell and shows no verdict)."""
    reason = refusal_before(plan)
    if reason:
        return Outcome(Record(cell=plan.cell, status="unsupported", reason=reason, metrics=Metrics()), None)
    result = model_prediction(plan)
    reason = refusal_after(plan, result)
    if reason:
        return Outcome(Record(cell=plan.cell, status="unsupported", reason=reason, profile_hash=plan.profile.digest),
                       None)
    metrics = prediction_metrics(result.prediction.to_dict())
    if plan.cell.scenario == "inference":
        metrics.latency_s = {"p50": metrics.step_time_s}     # a prediction has no spread: its one value
    oom = result.prediction.oom
    if with_ends and plan.cell.scenario == "train":         # what the report's robustness column reads
        ends = estimate_ends(result, plan.settings, plan.llm)
        if ends:
            metrics.extra["estimate_ends"] = ends
    record = Record(cell=plan.cell, status="oom" if oom else "ok",
                    reason=oom_reason(result.prediction, plan.profile) if oom else None,
                    metrics=metrics, profile_hash=plan.profile.digest)
    return Outcome(record, result)


def predict_cell(cell: Cell, profile: HardwareProfile | str) -> CellPrediction:
    """The prediction of a cell a command answers alone, on `profile` (whatever the cell's own target);
    a refusal is one line (ModelRefusal)."""
    plan = resolve(cell, profile)
    outcome = predict_plan(plan, with_ends=False)
    if outcome.result is None:
        raise ModelRefusal(f"unsupported on model:{plan.profile.name}: {outcome.record.reason}")
    return outcome.result
