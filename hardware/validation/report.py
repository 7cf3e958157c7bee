"""`msbench validate --profile ascend910a|ascend910b`: the device model against published runs.

Predicts every expressible case of the profile's chip (hardware/validation/published.toml) with
the cell that stands for its recipe, and reports, per case, the prediction in the published unit,
the relative step-time error and the OOM verdict (every published run fitted); then the median
|error|, and for each one-setting pair the predicted against the published throughput ratio.
A case whose prediction fails (graph extraction or host-cost probe) is a row with its reason.
Only one part of the file is evaluated at a time: the development part by default, the locked part
when asked for (hardware/validation/cases.py, `split_of`; `msbench validate --locked`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

from hardware.model.outcome import ModelRefusal, predict_cell
from hardware.validation.cases import Catalogue, Pair, PublishedCase
from msbench.cell import Cell
from msbench.errors import ConfigError

STEP_GOAL = 0.15          # issue 11: median |step-time error| on each chip
RATIO_GOAL = 0.15         # issue 41: a pair's predicted ratio within 15% of the published one (issue 11 had 25%)


class PredictionLike(Protocol):
    step_time_s: float
    oom: bool
    bound: str
    peak_memory_bytes: int
    memory_capacity_bytes: int


Predictor = Callable[[PublishedCase], PredictionLike]


def model_predictor(case: PublishedCase) -> PredictionLike:
    """The product path: the case's cell on its profile through the one prediction path (a refusal is a row)."""
    cell = Cell(workload=case.workload, preset=case.preset, overrides=dict(case.overrides), settings=case.settings,
                target=f"model:{case.profile}", label=case.id)
    return predict_cell(cell, case.profile).prediction


@dataclass(frozen=True)
class CaseResult:
    id: str
    workload: str
    chip: str
    profile: str
    mindspore: str
    unit: str
    published: float                    # the figure, in `unit`
    published_step_s: float
    predicted: float | None             # the prediction, in `unit`
    predicted_step_s: float | None
    step_error: float | None            # predicted / published step time - 1
    bound: str | None
    oom: bool | None
    fits: bool | None                   # what the source says (a published run fitted)
    oom_verdict_right: bool | None
    peak_gib: float | None
    assumed: int                        # how many settings the comparison assumes (see the file)
    failed: str | None = None


@dataclass(frozen=True)
class PairResult:
    a: str
    b: str
    differs: str
    published_ratio: float              # throughput of b over throughput of a, as published
    predicted_ratio: float | None
    ratio_error: float | None           # predicted / published ratio - 1
    same_side: bool | None              # both ratios above 1, both below, or both exactly 1
    within_goal: bool | None


SKIPPED = "skipped (--skip)"


def predict_case(case: PublishedCase, predictor: Predictor, skip: bool = False) -> CaseResult:
    base = dict(id=case.id, workload=case.workload, chip=case.chip, profile=case.profile, mindspore=case.mindspore,
                unit=case.unit, published=case.figure, published_step_s=case.published_step_s, fits=case.fits,
                assumed=len(case.assumed))
    unpredicted = dict(predicted=None, predicted_step_s=None, step_error=None, bound=None, oom=None,
                       oom_verdict_right=None, peak_gib=None)
    if skip:
        return CaseResult(**base, **unpredicted, failed=SKIPPED)
    try:
        p = predictor(case)
    except (RuntimeError, MemoryError, ModelRefusal) as err:   # extraction/probe failures, refusals: a row
        reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"[:200]
        return CaseResult(**base, **unpredicted, failed=reason)
    verdict = None if case.fits is None else (p.oom == (not case.fits))
    return CaseResult(**base, predicted=case.in_unit(p.step_time_s), predicted_step_s=p.step_time_s,
                      step_error=p.step_time_s / case.published_step_s - 1.0, bound=p.bound, oom=p.oom,
                      oom_verdict_right=verdict, peak_gib=p.peak_memory_bytes / 2**30)


def throughput(case: PublishedCase, step_s: float) -> float:
    return case.samples_per_step / step_s


def compare_pair(pair: Pair, catalogue: Catalogue, results: dict[str, CaseResult]) -> PairResult:
    a, b = catalogue.case(pair.a), catalogue.case(pair.b)
    published = throughput(b, b.published_step_s) / throughput(a, a.published_step_s)
    ra, rb = results[pair.a], results[pair.b]
    if ra.predicted_step_s is None or rb.predicted_step_s is None:
        return PairResult(pair.a, pair.b, pair.differs, published, None, None, None, None)
    predicted = throughput(b, rb.predicted_step_s) / throughput(a, ra.predicted_step_s)
    error = predicted / published - 1.0
    same_side = (predicted - 1.0) * (published - 1.0) > 0 or predicted == published == 1.0
    return PairResult(pair.a, pair.b, pair.differs, published, predicted, error, same_side,
                      same_side and abs(error) <= RATIO_GOAL)


def pairs_of(catalogue: Catalogue, profile: str) -> list[Pair]:
    """The pairs with a side on this profile (a chip pair is reported under both chips)."""
    return [p for p in catalogue.pairs if profile in (catalogue.case(p.a).profile, catalogue.case(p.b).profile)]


def summarize(rows: Sequence[CaseResult], pairs: Sequence[PairResult]) -> dict[str, Any]:
    errors = [abs(r.step_error) for r in rows if r.step_error is not None]
    verdicts = [r.oom_verdict_right for r in rows if r.oom_verdict_right is not None]
    judged = [p for p in pairs if p.predicted_ratio is not None]
    return {
        "cases": len(rows), "predicted": len(errors), "skipped": sum(r.failed == SKIPPED for r in rows),
        "failed": sum(r.failed not in (None, SKIPPED) for r in rows),
        "step_median_abs_error": statistics.median(errors) if errors else None,
        "step_mean_abs_error": statistics.fmean(errors) if errors else None,
        "step_max_abs_error": max(errors) if errors else None,
        "within_goal": sum(e <= STEP_GOAL for e in errors),
        "oom_verdicts": len(verdicts), "oom_verdicts_right": sum(verdicts),
        "pairs": len(pairs), "pairs_judged": len(judged),
        "pairs_same_side": sum(bool(p.same_side) for p in judged),
        "pairs_within_goal": sum(bool(p.within_goal) for p in judged),
    }


def evaluate(catalogue: Catalogue, profile: str, predictor: Predictor | None = None,
             skip: Sequence[str] = (), part: str = "dev") -> dict[str, Any]:
    """Every expressible case of `profile` in one part of the file (`dev` unless the locked part is asked
    for), the partners of its pairs, and their summary (plain data).
    `skip` names cases not to predict here (a graph too large to extract on this machine): they stay
    in the table, marked, so a skipped case is never silently missing."""
    predictor = predictor or model_predictor
    catalogue = catalogue.part(part)
    own = catalogue.expressible(profile)
    pairs = pairs_of(catalogue, profile)
    needed = [c.id for c in own] + [i for p in pairs for i in (p.a, p.b)]
    unknown = sorted(set(skip) - set(needed))
    if unknown:
        raise ConfigError("--skip", unknown[0],
                          f"ids of the cases {profile} predicts: {', '.join(dict.fromkeys(needed))}")
    results: dict[str, CaseResult] = {}
    for case_id in dict.fromkeys(needed):               # one at a time, in file order: extraction is heavy
        results[case_id] = predict_case(catalogue.case(case_id), predictor, skip=case_id in skip)
    rows = [results[c.id] for c in own]
    compared = [compare_pair(p, catalogue, results) for p in pairs]
    unexpressible = [{"id": c.id, "chip": c.chip, "why": c.why, "source": c.source}
                     for c in catalogue.cases if not c.expressible]
    return table_data(profile, part, rows, compared, unexpressible)


def table_data(profile: str, part: str, rows: Sequence[CaseResult], pairs: Sequence[PairResult] = (),
               unexpressible: Sequence[dict[str, Any]] = (), reference: str = "published") -> dict[str, Any]:
    """The report's plain data (what `render` and `--json` show); `reference` names what the rows are
    compared with: published figures, or the user's own measured runs."""
    return {"profile": profile, "part": part, "reference": reference,
            "goals": {"step_median_abs_error": STEP_GOAL, "pair_ratio_error": RATIO_GOAL},
            "summary": summarize(rows, pairs), "cases": [asdict(r) for r in rows],
            "pairs": [asdict(p) for p in pairs], "not_expressible": list(unexpressible)}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0%}"


def figure(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    return f"{x:.1f} {unit}" if x < 1000 else f"{x:,.0f} {unit}"


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return lines


def render(data: dict[str, Any]) -> str:
    """Markdown: what the terminal shows and what docs/generated/validation-*.md holds."""
    def verdict(r: dict[str, Any]) -> str:
        if r["failed"]:
            return "-"
        return f"{'OOM' if r['oom'] else 'fits'} ({'right' if r['oom_verdict_right'] else 'WRONG'})"

    s = data["summary"]
    out: list[str] = []
    if data["pairs"]:       # the one-knob ratios lead: they decide the report's verdicts (issue 41)
        out += [*markdown_table(
            ["pair (throughput b / a)", "differs in", "published", "model", "ratio err", "same side", f"within {data['goals']['pair_ratio_error']:.0%}"],
            [[f"{p['b']} / {p['a']}", p["differs"], f"{p['published_ratio']:.2f}",
              "-" if p["predicted_ratio"] is None else f"{p['predicted_ratio']:.2f}", pct(p["ratio_error"]),
              "-" if p["same_side"] is None else ("yes" if p["same_side"] else "NO"),
              "-" if p["within_goal"] is None else ("yes" if p["within_goal"] else "no")] for p in data["pairs"]])]
        out += ["", f"pairs: {s['pairs_same_side']}/{s['pairs_judged']} on the published side of 1, "
                f"{s['pairs_within_goal']}/{s['pairs_judged']} within {data['goals']['pair_ratio_error']:.0%}.", ""]
    out += markdown_table(
        ["case", "chip (MindSpore)", data.get("reference", "published"), "model", "step err", "bound", "memory",
         "assumed"],
        [[r["id"], f"{r['chip']} ({r['mindspore']})", figure(r["published"], r["unit"]),
          figure(r["predicted"], r["unit"]) if not r["failed"] else
          (r["failed"] if r["failed"] == SKIPPED else f"failed: {r['failed']}"),
          pct(r["step_error"]), r["bound"] or "-", verdict(r), r["assumed"]] for r in data["cases"]])
    med = "-" if s["step_median_abs_error"] is None else f"{s['step_median_abs_error']:.1%}"
    mean = "-" if s["step_mean_abs_error"] is None else f"{s['step_mean_abs_error']:.1%}"
    skipped = f" ({s['skipped']} skipped)" if s["skipped"] else ""
    part = data.get("part", "dev")
    scope = "measured runs" if part == "measured" else f"{part} part"
    out += ["", f"{data['profile']} ({scope}): {s['predicted']} of {s['cases']} cases predicted{skipped}; "
            f"median |step-time error| {med} "
            f"(goal <= {data['goals']['step_median_abs_error']:.0%}), mean {mean}, {s['within_goal']} within the goal; "
            f"OOM verdicts right {s['oom_verdicts_right']}/{s['oom_verdicts']}."]
    if data["not_expressible"]:
        out += ["", "Published runs msbench cannot express (all chips):"]
        out += [f"- {c['id']} ({c['chip']}): {c['why']}" for c in data["not_expressible"]]
    return "\n".join(out)
