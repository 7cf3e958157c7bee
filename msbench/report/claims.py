"""The tuning-tip claims, checked against pairs of cells that differ only in the knobs a tip names.

Each claim finds its evidence (pairs, or for gradient accumulation triples, of ok cells in the same
context with every other knob equal), computes a few quantities per piece of evidence and grades
each against stated thresholds: `holds` (2), `partly` (1) or `does not hold` (0). A piece of
evidence holds when every check holds, does not hold when every measured check fails, and is
`partly` otherwise; a required check that could not be measured (e.g. no accuracy) caps it at
`partly`. A claim on a chip combines its evidence the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pandas as pd

# The verdict names are re-exported: callers read a verdict and the claims from this one module.
from msbench.report.claim_kinds import (FAILS, HOLDS, NO_DATA, PARTLY, Check, Claim, Evidence,  # noqa: F401
                                        combine_verdicts, micro_batch, pairs, same_except, speed)
from msbench.report.claims_llm import llm_claims
from msbench.report.claims_tips import TIP_CLAIMS
from msbench.report.frame import metric, paired_accuracy_pp, ratio
from msbench.stats import is_effect


# ---- finding the cells behind a claim (pairs and the rest: claim_kinds.py) ---------------------------

def accumulation_triples(frame: pd.DataFrame) -> Iterator[tuple[pd.Series, ...]]:
    """(small batch b, accumulated b x k, large batch b*k): everything else equal."""
    for rows in same_except(frame, {"batch_size", "grad_accum"}):
        plain = {micro_batch(r): r for r in rows if int(r["grad_accum"]) == 1}
        for acc in rows:
            k, micro = int(acc["grad_accum"]), micro_batch(acc)
            if k > 1 and micro is not None and micro in plain and micro * k in plain:
                yield plain[micro], acc, plain[micro * k]


# ---- quantities ----------------------------------------------------------------------------------

def accuracy_loss_pp(ref: pd.Series, alt: pd.Series) -> float | None:
    """ref minus alt accuracy in pp over seed-paired runs; 0 when its 95% interval holds 0 (within seed
    noise, no loss shown), so a verdict never rests on one seed's luck. One seed: the plain difference."""
    delta, interval = paired_accuracy_pp(ref, alt)
    if delta is None:
        return None
    return 0.0 if is_effect(interval) is False else delta



def amp_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    return {**speed(ref, alt),
            "memory_ratio": ratio(metric(alt, "peak_memory_bytes"), metric(ref, "peak_memory_bytes")),
            "accuracy_loss_pp": accuracy_loss_pp(ref, alt)}


def pipeline_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    kept = ratio(metric(ref, "throughput"), metric(alt, "throughput"))
    return {"throughput_lost": None if kept is None else 1.0 - kept,
            "data_share_after": ratio(metric(alt, "component.data"), metric(alt, "step_time_s"))}


def activation_bytes(row: pd.Series) -> float | None:
    for key in ("peak_memory_detail.activations", "peak_memory_detail.activation"):
        if metric(row, key) is not None:
            return metric(row, key)
    return metric(row, "peak_memory_bytes")


def device_seconds(row: pd.Series) -> float | None:
    """Kernel time per step (compute- plus memory-bound components), else the whole step."""
    parts = [metric(row, "component.compute"), metric(row, "component.memory")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else metric(row, "step_time_s")


def recompute_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    kept = ratio(activation_bytes(alt), activation_bytes(ref))
    slower = ratio(device_seconds(alt), device_seconds(ref))
    return {"activation_cut": None if kept is None else 1.0 - kept,
            "extra_compute": None if slower is None else slower - 1.0}


def accumulation_measure(small: pd.Series, acc: pd.Series, large: pd.Series) -> dict[str, float | None]:
    return {"accuracy_shortfall_pp": accuracy_loss_pp(large, acc),
            "memory_vs_small": ratio(metric(acc, "peak_memory_bytes"), metric(small, "peak_memory_bytes"))}


def scaling_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    gain = ratio(metric(alt, "throughput"), metric(ref, "throughput"))
    return {"efficiency": None if gain is None else gain / (int(alt["devices"]) / int(ref["devices"]))}


SPEEDUP_BEATS = Check("speedup", "speed-up", holds=1.05, partly=1.0)
MANY_WORKERS = tuple(range(2, 129))

CLAIMS: tuple[Claim, ...] = (
    Claim("amp", "Mixed precision (O2/O3 against O0) speeds training up 1.5-2x or more, loses under 1% "
          "accuracy and needs about half the memory",
          "cells with amp_level O0 and O2/O3, otherwise equal",
          (Check("speedup", "speed-up", 1.5, 1.05),
           Check("memory_ratio", "memory ratio", 0.6, 0.9, higher_is_better=False, unit="ratio"),
           Check("accuracy_loss_pp", "accuracy loss (0 within seed noise)", 1.0, 2.0, higher_is_better=False,
                 unit="pp")),
          pairs({"amp_level": ("O0",)}, {"amp_level": ("O2", "O3")}, free=("loss_scale", "keep_batchnorm_fp32")),
          amp_measure, accuracy_rows=(0, 1)),
    Claim("graph_mode", "Graph mode beats PyNative mode", "cells with mode pynative and graph, otherwise equal",
          (SPEEDUP_BEATS,), pairs({"mode": ("pynative",)}, {"mode": ("graph",)}), speed),
    Claim("graph_kernel", "Graph-kernel fusion raises throughput",
          "cells with graph_kernel false and true, otherwise equal",
          (SPEEDUP_BEATS,), pairs({"graph_kernel": (False,)}, {"graph_kernel": (True,)}), speed),
    Claim("sink", "Dataset sink mode speeds training up by 50-100%", "cells with sink false and true, otherwise equal",
          (Check("speedup", "speed-up", 1.5, 1.05),),
          pairs({"sink": (False,)}, {"sink": (True,)}, free=("sink_size",)), speed),
    Claim("data_pipeline", "More data-pipeline workers and prefetch remove a data bottleneck that can cost "
          "over 60% of throughput", "cells with workers 1 and more workers, otherwise equal (prefetch free)",
          (Check("throughput_lost", "throughput lost with 1 worker", 0.6, 0.05, unit="pct"),
           Check("data_share_after", "data share after", 0.1, 0.3, higher_is_better=False, unit="pct",
                 required=False)),
          pairs({"workers": (1,)}, {"workers": MANY_WORKERS}, free=("prefetch",)), pipeline_measure),
    Claim("recompute", "Recompute cuts activation memory by 30-50% for about 20-33% more compute",
          "cells with recompute none and selective/full, otherwise equal",
          (Check("activation_cut", "activation memory cut", 0.3, 0.1, unit="pct"),
           Check("extra_compute", "extra compute", 0.35, 0.6, higher_is_better=False, unit="pct")),
          pairs({"recompute": ("none",)}, {"recompute": ("selective", "full")}), recompute_measure),
    Claim("grad_accum", "Gradient accumulation reaches a larger batch's accuracy at the small batch's memory",
          "three cells: batch b, batch b with grad_accum k, batch b*k, otherwise equal",
          (Check("accuracy_shortfall_pp", "accuracy short of the large batch (0 within seed noise)", 1.0, 2.0,
                 higher_is_better=False,
                 unit="pp"),
           Check("memory_vs_small", "memory vs the small batch", 1.25, 1.5, higher_is_better=False, unit="ratio")),
          accumulation_triples, accumulation_measure, accuracy_rows=(2, 1)),
    Claim("data_parallel", "Data parallelism scales near-linearly to 8 devices",
          "cells with devices 1 and 8, otherwise equal",
          (Check("efficiency", "scaling efficiency at 8", 0.9, 0.7, unit="pct"),),
          pairs({"devices": (1,)}, {"devices": (8,)}), scaling_measure),
) + llm_claims()                     # the LLM-scale claims (msbench/report/claims_llm.py)

CLAIMS = CLAIMS + TIP_CLAIMS


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    target: str
    verdict: str
    evidence: tuple[Evidence, ...] = field(default=())


def evaluate_claims(frame: pd.DataFrame) -> list[ClaimResult]:
    """A verdict per claim and per target present in the frame (NO_DATA where no cells fit)."""
    targets = sorted(frame["target"].dropna().unique()) if "target" in frame.columns else []
    results = []
    for claim in CLAIMS:
        evidence = claim.evaluate(frame) if targets else []
        for target in targets:
            mine = tuple(e for e in evidence if e.target == target)
            results.append(ClaimResult(claim, target, combine_verdicts([e.verdict for e in mine]), mine))
    return results


def summarize(result: ClaimResult) -> str:
    """Numbers behind a verdict, per workload (with what bounds its reference cells): each check's range."""
    if not result.evidence:
        return f"no cells: needs {result.claim.needs}"
    parts = []
    for workload in sorted({e.workload for e in result.evidence}):
        mine = [e for e in result.evidence if e.workload == workload]
        shown = []
        for check in result.claim.checks:
            values = [e.values.get(check.name) for e in mine if e.values.get(check.name) is not None]
            if not values:
                shown.append(check.show(None))
            elif min(values) == max(values):
                shown.append(check.show(values[0]))
            else:
                shown.append(f"{check.show(min(values))}–{check.value_text(max(values))}")
        bounds = sorted({e.bound for e in mine if e.bound})
        limited = f" ({'/'.join(bounds)}-bound)" if bounds else ""
        parts.append(f"{workload}{limited}: " + ", ".join(shown))
    return "; ".join(parts)


def claims_table(results: list[ClaimResult], robustness: Mapping[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """One row per claim and target; `robustness` ((claim key, target) -> text, msbench.report.uncertainty)
    adds whether the verdict survives the model's estimate ranges."""
    columns = ["claim", "target", "verdict", *(["robustness"] if robustness is not None else []), "workloads",
               "numbers", "cells"]
    return pd.DataFrame([{
        "claim": r.claim.text, "target": r.target, "verdict": r.verdict,
        "robustness": (robustness or {}).get((r.claim.key, r.target), ""),
        "workloads": len({e.workload for e in r.evidence}), "numbers": summarize(r),
        "cells": ", ".join(dict.fromkeys(c for e in r.evidence for c in e.cells)),
    } for r in results], columns=columns)


def evidence_table(results: list[ClaimResult]) -> pd.DataFrame:
    rows = []
    for r in results:
        for e in r.evidence:
            rows.append({"claim": r.claim.key, "workload": e.workload, "target": e.target,
                         "compared": " → ".join(e.labels), "verdict": e.verdict,
                         "values": ", ".join(c.show(e.values.get(c.name)) for c in r.claim.checks),
                         "cells": ", ".join(e.cells)})
    return pd.DataFrame(rows, columns=["claim", "workload", "target", "compared", "verdict", "values", "cells"])


def thresholds_table() -> pd.DataFrame:
    return pd.DataFrame([{"claim": c.key, "check": k.rule()} for c in CLAIMS for k in c.checks],
                        columns=["claim", "check"])
