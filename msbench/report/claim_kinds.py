"""What a claim is made of: its checks with thresholds, the evidence it grades, how grades combine, and
how the cells behind a claim are found (pairs equal but for the knobs a tip names). The claims themselves
are in claims.py (and claims_llm.py, claims_tips.py), which all build on this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

import pandas as pd

from msbench.report.frame import CONTEXT, KNOBS, metric, ratio

HOLDS, PARTLY, FAILS = "holds", "partly", "does not hold"
NO_DATA = "no data"
GRADE_TEXT = {2: HOLDS, 1: PARTLY, 0: FAILS}
UNITS = {"x": "×", "ratio": "", "pp": " pp", "pct": "%", "batch": "", "gib": " GiB"}
WHOLE_UNITS = ("pct", "batch")     # shown without decimals


@dataclass(frozen=True)
class Check:
    """One graded quantity of a claim, e.g. speed-up >= 1.5x holds, >= 1.05x partly."""

    name: str
    label: str
    holds: float
    partly: float
    higher_is_better: bool = True
    unit: str = "x"
    required: bool = True
    graded: bool = True              # False: a number the claim states (e.g. a batch size), never graded

    def grade(self, value: float | None) -> int | None:
        if value is None or not self.graded:
            return None
        sign = 1.0 if self.higher_is_better else -1.0
        if sign * value >= sign * self.holds:
            return 2
        return 1 if sign * value >= sign * self.partly else 0

    def value_text(self, value: float | None) -> str:
        if value is None:
            return "n/a"
        number = value * 100.0 if self.unit == "pct" else value
        if self.unit == "gib":
            return f"{number:g}{UNITS[self.unit]}"
        digits = 0 if self.unit in WHOLE_UNITS else 2
        return f"{number:.{digits}f}{UNITS[self.unit]}"

    def show(self, value: float | None) -> str:
        return f"{self.label} {self.value_text(value)}"

    def rule(self) -> str:
        if not self.graded:
            return f"{self.label}: stated, not graded"
        op = "≥" if self.higher_is_better else "≤"
        return (f"{self.label}: holds {op} {self.value_text(self.holds)}, partly {op} "
                f"{self.value_text(self.partly)}, else does not hold" + ("" if self.required else " (optional)"))


@dataclass(frozen=True)
class Evidence:
    """One comparison behind a claim: the cells, their labels and the graded quantities."""

    workload: str
    target: str
    labels: tuple[str, ...]
    cells: tuple[str, ...]
    values: Mapping[str, float | None]
    verdict: str
    bound: str | None = None          # what limits the reference cell (compute, memory, host, data, comm)
    mixed_commits: bool = False       # its cells were made at different commits


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    needs: str                       # what cells the claim needs, said when there are none
    checks: tuple[Check, ...]
    find: Callable[[pd.DataFrame], Iterator[tuple[pd.Series, ...]]]
    measure: Callable[..., dict[str, float | None]]
    # (reference, changed) positions, in the rows `find` yields, of the seed-paired accuracy delta a check
    # reads: the report shows that delta's interval width (msbench.report.accuracy_widths)
    accuracy_rows: tuple[int, int] | None = None

    def evaluate(self, frame: pd.DataFrame) -> list[Evidence]:
        out = []
        for rows in self.find(frame):
            values = self.measure(*rows)
            out.append(Evidence(
                workload=rows[0]["workload"], target=rows[0]["target"],
                labels=tuple(r["label"] for r in rows), cells=tuple(r["cell_id"] for r in rows),
                values=values, verdict=combine_checks(self.checks, values),
                bound=rows[0].get("bound") if isinstance(rows[0].get("bound"), str) else None,
                mixed_commits=len({r.get("made_at") for r in rows}) > 1))
        return out


def combine_checks(checks: tuple[Check, ...], values: Mapping[str, float | None]) -> str:
    grades = [(c, c.grade(values.get(c.name))) for c in checks]
    measured = [g for _, g in grades if g is not None]
    if not measured:
        return NO_DATA
    missing_required = any(g is None and c.required for c, g in grades)
    if all(g == 2 for g in measured):
        return PARTLY if missing_required else HOLDS
    return FAILS if all(g == 0 for g in measured) else PARTLY


def combine_verdicts(verdicts: list[str]) -> str:
    known = [v for v in verdicts if v != NO_DATA]
    if not known:
        return NO_DATA
    if all(v == HOLDS for v in known):
        return HOLDS
    return FAILS if all(v == FAILS for v in known) else PARTLY


# ---- finding the cells behind a claim ------------------------------------------------------------

def pairs(reference: Mapping[str, tuple], changed: Mapping[str, tuple],
          free: tuple[str, ...] = ()) -> Callable[[pd.DataFrame], Iterator[tuple[pd.Series, pd.Series]]]:
    """Pairs (reference cell, changed cell) of ok cells equal in context and every knob not named."""
    varied = set(reference) | set(changed) | set(free)

    def find(frame: pd.DataFrame) -> Iterator[tuple[pd.Series, pd.Series]]:
        for group in same_except(frame, varied):
            refs = [r for r in group if matches(r, reference)]
            alts = [r for r in group if matches(r, changed)]
            for ref in refs:
                for alt in alts:
                    if ref["cell_id"] != alt["cell_id"]:
                        yield ref, alt
    return find


def same_except(frame: pd.DataFrame, varied: set[str],
                statuses: tuple[str, ...] = ("ok",)) -> Iterator[list[pd.Series]]:
    """The rows of each group of cells with one of `statuses` that are equal in context and every knob not in
    `varied`, in frame order. The rows are made once per frame: a row of a wide mixed-dtype frame costs a
    copy of the whole frame's values, and taking them per group made most of a report's time."""
    ok = frame[frame["status"].isin(statuses)]
    if ok.empty:
        return iter(())
    keys = CONTEXT + [k for k in KNOBS if k not in varied and k in ok.columns]
    prepared = ok.astype({k: "object" for k in keys}).fillna({k: "-" for k in keys})
    rows = dict(prepared.iterrows())
    return iter([[rows[label] for label in group.index] for _, group in prepared.groupby(keys, sort=True)])


def matches(row: pd.Series, wanted: Mapping[str, tuple]) -> bool:
    return all(row[k] in values for k, values in wanted.items())


def micro_batch(row: pd.Series) -> int | None:
    """Per-device micro-batch: the knob, else samples per step / (devices x accumulation)."""
    size = row.get("batch_size")
    if size is not None and size == size:
        return int(size)
    thr, step = metric(row, "throughput"), metric(row, "step_time_s")
    if thr is None or step is None:
        return None
    return round(thr * step / (int(row["devices"]) * int(row["grad_accum"])))


def speed(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    return {"speedup": ratio(metric(alt, "throughput"), metric(ref, "throughput"))}
