"""Does a claim's verdict hang on a guess? Each device-model prediction lists the `estimate` constants
it read (`detail.estimates`, hardware/model/estimates.py). For every such constant, the cells of a
target are predicted again with it at each end of its range (the profile's `[estimates]`), the claims
are judged again, and a verdict that changes is "uncertain — depends on X (low–high)"; one that
survives every end is "robust".

This is a pure computation: predict() on the cells' cached graphs and the host-cost calibration
file. Nothing is extracted here; a cell whose graph is not cached leaves its target "not checked".
Only cells that read a constant are predicted again for it (a constant they did not read cannot move
them), so the work is one prediction per (cell, constant it read, end).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from hardware.model.host_time import HostCostLike
from hardware.model.opgraph import OpGraph
from hardware.model.predict import predict
from hardware.model.profile import Estimate, HardwareProfile, load_profile, with_estimate
from msbench.errors import UserError
from msbench.records import Record
from msbench.report import claims
from msbench.report.load import RecordSet

MODEL_PREFIX = "model:"
ROBUST, MEASURED = "robust", "measured (no model constants)"
# A cell's inputs to predict(): its (fused) graph and its host cost. Raises LookupError when not at hand.
CellInputs = Callable[[Record, HardwareProfile], tuple[OpGraph, HostCostLike]]


@dataclass(frozen=True)
class Flip:
    """One end of one constant's range at which a claim's verdict on a target changes."""

    claim: str
    target: str
    estimate: Estimate
    value: float
    verdict: str              # the verdict with the constant at `value`
    shipped: str              # the verdict at the profile's own values


@dataclass(frozen=True)
class Robustness:
    claim: str
    target: str
    text: str                 # "robust", "uncertain — depends on …", "measured …", "not checked: …"
    flips: tuple[Flip, ...] = ()


def cached_inputs(record: Record, profile: HardwareProfile) -> tuple[OpGraph, HostCostLike]:
    """The cell's graph from the cache only (GraphNotCached otherwise) and its calibrated host cost, with
    the pipeline's calibrated modes where a tip knob reads them (the target's own cell_host)."""
    from hardware.model.target import cell_graph, cell_host

    cell = record.cell
    graph = cell_graph(cell.workload, cell.preset, cell.overrides, cell.settings, profile, compile_missing=False)
    try:
        host = cell_host(cell.workload, cell.preset, cell.overrides, cell.settings)
    except UserError as err:
        raise LookupError(str(err)) from None
    return graph, host


def estimates_read(record: Record) -> tuple[str, ...]:
    detail = (record.metrics.extra or {}).get("detail") or {}
    return tuple(detail.get("estimates") or ())


# What compute.kernels() reads of a profile: an estimate end that leaves these equal leaves every kernel's
# time as it is (launch, host and comm constants), so the kernels are costed once per cell and reused.
DEVICE_SECTIONS = ("cube", "vector", "memory", "kernel_classes", "precision")


class Repredictor:
    """Predicts cells again on variants of one profile, lowering each graph once (lowering reads none of
    the estimate constants: the chip kind, core count, cast folding, jit level) and costing kernels once
    per distinct lowered step and device-side profile."""

    def __init__(self, profile: HardwareProfile) -> None:
        self.profile = profile
        self.lowered: dict[str, tuple[OpGraph, int]] = {}     # cell id -> (lowered graph, its step's number)
        self.steps: dict[tuple, int] = {}                        # distinct lowered op lists, numbered
        self.kernels: dict[tuple, list] = {}

    def __call__(self, record: Record, graph: OpGraph, host: HostCostLike, profile: HardwareProfile) -> Record:
        from hardware.model.compute import kernels
        from hardware.model.lowering import lower

        settings = record.cell.settings
        if record.cell_id not in self.lowered:
            lowered = lower(graph, settings, self.profile)
            self.lowered[record.cell_id] = lowered, self.steps.setdefault(lowered.ops, len(self.steps))
        lowered, step = self.lowered[record.cell_id]
        key = (step, tuple(getattr(profile, s) for s in DEVICE_SECTIONS))
        if key not in self.kernels:
            self.kernels[key] = kernels(lowered.ops, profile)
        return repredicted(record, lowered, host, profile, self.kernels[key])


def repredicted(record: Record, graph: OpGraph, host: HostCostLike, profile: HardwareProfile,
                device_kernels: list | None = None) -> Record:
    """The record as the device model predicts it on `profile`; its accuracy (real runs) is kept."""
    from hardware.model.target import prediction_metrics

    pred = predict(graph, record.cell.settings, profile, host, device_kernels)
    new = prediction_metrics(pred.to_dict())
    old = record.metrics
    metrics = dataclasses.replace(
        new, accuracy=old.accuracy, accuracy_metric=old.accuracy_metric, accuracy_delta_pp=old.accuracy_delta_pp,
        accuracy_delta_ci95_pp=old.accuracy_delta_ci95_pp, extra={**old.extra, "detail": new.extra["detail"]})
    return dataclasses.replace(record, status="oom" if pred.oom else "ok", metrics=metrics,
                               reason="predicted OOM" if pred.oom else None)


@dataclass(frozen=True)
class Judged:
    """Claims judged on one target's records, with what a re-judgement can reuse: which cells each
    claim compared. Pairing reads knobs and status only, so while no cell's status moves (an estimate
    that turns a cell OOM does), the same comparisons are only measured again (pandas grouping is the
    slow part of judging, ~0.1 s a claim)."""

    verdicts: dict[str, str]                          # claim key -> verdict on the target
    compared: dict[str, tuple[tuple[str, ...], ...]]  # claim key -> the cell ids of each comparison
    claims: dict[str, claims.Claim]
    statuses: dict[str, str]                          # cell id -> status

    def again(self, records: list[Record], target: str) -> "Judged":
        statuses = {r.cell_id: r.status for r in records}
        if statuses != self.statuses:
            return judge(records, target)
        frame = RecordSet.of(records).frame
        rows = {row["cell_id"]: row for _, row in frame.iterrows()}
        found = {key: claims.combine_verdicts([claims.combine_checks(self.claims[key].checks,
                                                                     self.claims[key].measure(*(rows[c] for c in cells)))
                                               for cells in compared])
                 for key, compared in self.compared.items()}
        return dataclasses.replace(self, verdicts=found)


def judge(records: Iterable[Record], target: str) -> Judged:
    """The claims' verdicts on `target` judged from these records (claims.evaluate_claims)."""
    records = list(records)
    mine = [r for r in claims.evaluate_claims(RecordSet.of(records).frame) if r.target == target]
    return Judged({r.claim.key: r.verdict for r in mine}, {r.claim.key: tuple(e.cells for e in r.evidence) for r in mine},
                  {r.claim.key: r.claim for r in mine}, {r.cell_id: r.status for r in records})


def target_robustness(records: list[Record], target: str, inputs: CellInputs) -> list[Robustness]:
    """Robustness of every claim on one device-model target, from that target's records."""
    profile = load_profile(target[len(MODEL_PREFIX):])
    shown = judge(records, target).verdicts
    judged = [r for r in records if r.status in ("ok", "oom") and estimates_read(r)]
    if not judged:
        return [Robustness(key, target, "" if verdict == claims.NO_DATA else
                           "not checked: no record lists the estimate constants its prediction read")
                for key, verdict in shown.items()]
    try:
        cell_inputs = {r.cell_id: inputs(r, profile) for r in judged}
    except LookupError as err:
        return [Robustness(key, target, "" if verdict == claims.NO_DATA else
                           f"not checked: {err} (run the matrix first; the report never extracts)")
                for key, verdict in shown.items()]
    predictor = Repredictor(profile)
    base = [predictor(r, *cell_inputs[r.cell_id], profile) if r.cell_id in cell_inputs else r for r in records]
    reference = judge(base, target)
    shipped = reference.verdicts
    stale = {k for k in shown if shipped.get(k) != shown[k]}
    read = {key for r in judged for key in estimates_read(r)}
    flips: list[Flip] = []
    for estimate in (e for e in profile.estimates if e.key in read):
        for value in dict.fromkeys((estimate.low, estimate.high)):
            varied = with_estimate(profile, estimate.key, value)
            moved = [predictor(b, *cell_inputs[b.cell_id], varied) if estimate.key in estimates_read(b) else b
                     for b in base]
            for key, verdict in reference.again(moved, target).verdicts.items():
                if verdict != shipped.get(key):
                    flips.append(Flip(key, target, estimate, value, verdict, shipped.get(key, claims.NO_DATA)))
    out = []
    for key, verdict in shown.items():
        mine = tuple(f for f in flips if f.claim == key)
        if key in stale:
            text = (f"not checked: the records are stale (predicted now: {shipped.get(key)}, recorded: {verdict}); "
                    "rerun the matrix")
        elif verdict == claims.NO_DATA:
            text = ""
        elif mine:
            ranges = dict.fromkeys(f"{f.estimate.key} ({f.estimate.low:g}–{f.estimate.high:g})" for f in mine)
            text = "uncertain — depends on " + ", ".join(ranges)
        else:
            text = ROBUST
        out.append(Robustness(key, target, text, mine if key not in stale else ()))
    return out


CACHE_KIND = "robustness"
# What a target's robustness is a function of besides its records: the model, its profiles and calibration,
# the workloads (their graphs), the settings rules and the report's claims.
from msbench.resources import suite_path
INPUT_DIRS = ("hardware/model", "hardware/profiles", "hardware/calibration", "hardware/capabilities.py",
              "msbench/settings.py", "msbench/report", "workloads")


def robustness_key(records: list[Record], target: str) -> str:
    from hardware.model.graph import mindspore_version
    from msbench.cache import content_key
    from msbench.freshness import files_digest

    judged = sorted(({"cell": r.cell.to_dict(), "status": r.status, "metrics": r.to_dict()["metrics"]} for r in records),
                    key=lambda d: d["cell"]["id"])
    return content_key("robustness/1", target, files_digest([suite_path(d) for d in INPUT_DIRS]), mindspore_version(),
                       judged)


def to_entry(found: list[Robustness]) -> dict[str, Any]:
    return {"results": [{"claim": r.claim, "target": r.target, "text": r.text,
                         "flips": [{**dataclasses.asdict(f), "estimate": dataclasses.asdict(f.estimate)} for f in r.flips]}
                        for r in found]}


def from_entry(entry: Mapping[str, Any]) -> list[Robustness]:
    return [Robustness(r["claim"], r["target"], r["text"],
                       tuple(Flip(**{**f, "estimate": Estimate(**f["estimate"])}) for f in r["flips"]))
            for r in entry["results"]]


def cached_target_robustness(records: list[Record], target: str) -> list[Robustness]:
    """target_robustness from the cache (a warm report re-predicts nothing), computed once otherwise."""
    from msbench.cache import cached

    entry, _ = cached(CACHE_KIND, robustness_key(records, target),
                      lambda: to_entry(target_robustness(records, target, cached_inputs)),
                      keep=lambda e: not any("run the matrix first" in r["text"] for r in e["results"]),
                      validate=from_entry)
    return from_entry(entry)


def robustness(now: RecordSet, inputs: CellInputs | None = None) -> dict[tuple[str, str], Robustness]:
    """(claim key, target) -> how the claim's verdict there stands up to the model's estimate ranges
    (`inputs`: where the cells' graphs and host costs come from; default the caches, memoized on disk)."""
    by_target: dict[str, list[Record]] = {}
    for record in now.records:
        if record.cell.scenario != "train":      # the claims judge training cells only
            continue
        by_target.setdefault(record.cell.target, []).append(record)
    out: dict[tuple[str, str], Robustness] = {}
    for target, records in sorted(by_target.items()):
        if target.startswith(MODEL_PREFIX):
            found = (target_robustness(records, target, inputs) if inputs is not None
                     else cached_target_robustness(records, target))
        else:
            found = [Robustness(key, target, MEASURED if verdict != claims.NO_DATA else "")
                     for key, verdict in judge(records, target).verdicts.items()]
        out.update({(r.claim, r.target): r for r in found})
    return out


def flips_table(found: Mapping[tuple[str, str], Robustness]) -> pd.DataFrame:
    """One row per range end that changes a verdict: which constant, where, and the verdict there."""
    rows = [{"claim": f.claim, "target": f.target, "constant": f.estimate.key,
             "range": f"{f.estimate.low:g}–{f.estimate.high:g}", "at": f"{f.value:g}", "verdict there": f.verdict,
             "verdict": f.shipped, "why an estimate": f.estimate.reason}
            for r in found.values() for f in r.flips]
    return pd.DataFrame(rows, columns=["claim", "target", "constant", "range", "at", "verdict there", "verdict",
                                       "why an estimate"])
