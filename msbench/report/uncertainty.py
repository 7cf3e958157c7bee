"""Does a claim's verdict hang on a guess? Each device-model record lists the `estimate` constants its
prediction read and, for each, the cell's figures with the constant at each end of its range
(`metrics.extra["estimate_ends"]`, made when the cell was predicted: hardware/model/estimate_ends.py).
The claims are judged again with every cell that read a constant moved to one end; a verdict that
changes is "uncertain — depends on X (low–high)"; one that survives every end is "robust".

Records only: nothing here predicts, extracts or reads a profile.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pandas as pd

from msbench.records import Record
from msbench.report import claims
from msbench.report.claim_kinds import combine_checks, combine_verdicts
from msbench.report.load import RecordSet
from msbench.cache import content_key
from msbench.freshness import files_digest
from msbench.cache import cached

MODEL_PREFIX = "model:"
ROBUST, MEASURED = "robust", "measured (no model constants)"
ENDS = "estimate_ends"


@dataclass(frozen=True)
class Estimate:
    """A model constant with no direct measurement, as a record carries it: its range and why."""

    key: str
    low: float
    high: float
    reason: str


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


def estimates_read(record: Record) -> tuple[str, ...]:
    detail = (record.metrics.extra or {}).get("detail") or {}
    return tuple(detail.get("estimates") or ())


def estimate_ends(record: Record) -> Mapping[str, Any]:
    return (record.metrics.extra or {}).get(ENDS) or {}


def at_end(record: Record, key: str, value: str) -> Record:
    """The record as predicted with constant `key` at `value` (its accuracy, from real runs, is kept)."""
    end = dict(estimate_ends(record)[key]["at"][value])
    status = end.pop("status")
    return dataclasses.replace(record, status=status, metrics=dataclasses.replace(record.metrics, **end),
                               reason="predicted OOM" if status == "oom" else None)


def estimates_of(records: Iterable[Record]) -> list[Estimate]:
    """Every constant some record read and varied, with the range its records state."""
    found: dict[str, Estimate] = {}
    for record in records:
        for key, entry in estimate_ends(record).items():
            if isinstance(entry, Mapping):
                found.setdefault(key, Estimate(key, entry["low"], entry["high"], entry["reason"]))
    return [found[k] for k in sorted(found)]


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
        found = {key: combine_verdicts([combine_checks(self.claims[key].checks,
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


def not_checked(shown: Mapping[str, str], target: str, why: str) -> list[Robustness]:
    return [Robustness(key, target, "" if verdict == claims.NO_DATA else f"not checked: {why}")
            for key, verdict in shown.items()]


def target_robustness(records: list[Record], target: str) -> list[Robustness]:
    """Robustness of every claim on one device-model target, from that target's records."""
    reference = judge(records, target)
    shown = reference.verdicts
    judged = [r for r in records if r.status in ("ok", "oom") and estimates_read(r)]
    if not judged:
        return not_checked(shown, target, "no record lists the estimate constants its prediction read")
    unvaried = next((r for r in judged if not any(isinstance(v, Mapping) for v in estimate_ends(r).values())), None)
    if unvaried is not None:
        why = estimate_ends(unvaried).get("unread") or "a record has no estimate range ends (rerun the matrix)"
        return not_checked(shown, target, f"{unvaried.cell.workload}: {why}")
    flips: list[Flip] = []
    for estimate in estimates_of(judged):
        for value in dict.fromkeys((estimate.low, estimate.high)):
            text = f"{value:g}"
            moved = [at_end(r, estimate.key, text) if estimate.key in estimate_ends(r) else r for r in records]
            for key, verdict in reference.again(moved, target).verdicts.items():
                if verdict != shown.get(key):
                    flips.append(Flip(key, target, estimate, value, verdict, shown.get(key, claims.NO_DATA)))
    out = []
    for key, verdict in shown.items():
        mine = tuple(f for f in flips if f.claim == key)
        if verdict == claims.NO_DATA:
            text = ""
        elif mine:
            ranges = dict.fromkeys(f"{f.estimate.key} ({f.estimate.low:g}–{f.estimate.high:g})" for f in mine)
            text = "uncertain — depends on " + ", ".join(ranges)
        else:
            text = ROBUST
        out.append(Robustness(key, target, text, mine))
    return out


CACHE_KIND = "robustness"


def robustness_key(records: list[Record], target: str) -> str:
    """A function of the records and the claims' code (msbench/report)."""
    from pathlib import Path


    judged = sorted(({"cell": r.cell.to_dict(), "status": r.status, "metrics": r.to_dict()["metrics"]} for r in records),
                    key=lambda d: d["cell"]["id"])
    return content_key("robustness/2", target, files_digest([Path(__file__).resolve().parent]), judged)


def to_entry(found: list[Robustness]) -> dict[str, Any]:
    return {"results": [{"claim": r.claim, "target": r.target, "text": r.text,
                         "flips": [{**dataclasses.asdict(f), "estimate": dataclasses.asdict(f.estimate)} for f in r.flips]}
                        for r in found]}


def from_entry(entry: Mapping[str, Any]) -> list[Robustness]:
    return [Robustness(r["claim"], r["target"], r["text"],
                       tuple(Flip(**{**f, "estimate": Estimate(**f["estimate"])}) for f in r["flips"]))
            for r in entry["results"]]


def cached_target_robustness(records: list[Record], target: str) -> list[Robustness]:
    """target_robustness from the cache (a warm report judges nothing again), computed once otherwise."""
    entry, _ = cached(CACHE_KIND, robustness_key(records, target), lambda: to_entry(target_robustness(records, target)),
                      validate=from_entry)
    return from_entry(entry)


def robustness(now: RecordSet) -> dict[tuple[str, str], Robustness]:
    """(claim key, target) -> how the claim's verdict there stands up to the model's estimate ranges."""
    by_target: dict[str, list[Record]] = {}
    for record in now.records:
        if record.cell.scenario != "train":      # the claims judge training cells only
            continue
        by_target.setdefault(record.cell.target, []).append(record)
    out: dict[tuple[str, str], Robustness] = {}
    for target, records in sorted(by_target.items()):
        if target.startswith(MODEL_PREFIX):
            found = cached_target_robustness(records, target)
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
