"""Shared views of the records frame: the comparison context of a cell and its baseline cell.

Cells are compared only within a *context*: the same workload, preset, preset overrides and
target. Inside it the cell labelled "base" (the matrix's baseline) is the reference.
"""

from __future__ import annotations

import math
from typing import Iterator

import pandas as pd

from msbench.stats import is_effect, paired_delta_pp

from msbench.records import Metrics
from msbench.settings import DEFAULTS

CONTEXT = ["workload", "preset", "overrides", "target"]
KNOBS = list(DEFAULTS)
GIB = float(1 << 30)
BASE_LABEL = "base"


def ok_cells(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["status"] == "ok"]


def contexts(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(readable name, rows) per context, in a stable order."""
    if frame.empty:
        return
    for _, rows in frame.groupby(CONTEXT, sort=True, dropna=False):
        yield context_name(rows.iloc[0]), rows


def context_name(row: pd.Series) -> str:
    overrides = row.get("overrides") or "{}"
    extra = "" if overrides in ("{}", "") else f" {overrides}"
    return f"{row['workload']} ({row['preset']}{extra}) on {row['target']}"


def base_of(rows: pd.DataFrame) -> pd.Series | None:
    """The ok baseline cell of one context, or None."""
    base = rows[(rows["label"] == BASE_LABEL) & (rows["status"] == "ok")]
    return None if base.empty else base.iloc[0]


def metric(row: pd.Series, name: str) -> float | None:
    """A metric of a row as a float, None when absent or NaN."""
    value = row.get(name)
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def ratio(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return new / old


# The five places a step's time goes (DESIGN.md, the device model's `bound`); from the model's kernel
# split where the record carries it, else a target's own breakdown as it stands (e.g. a profiler's).
COMPONENTS = ("compute", "memory", "host", "data", "comm")
HOST_PARTS = ("dispatch", "roundtrip", "transfer")


def components(metrics: Metrics) -> dict[str, float]:
    """Seconds per step by component. The device model's breakdown is by phase (forward, backward, ...)
    plus host and data parts; its compute-/memory-bound kernel totals sit in `extra.detail`."""
    detail = (metrics.extra or {}).get("detail") or {}
    parts = metrics.breakdown or {}
    if "compute_bound_s" in detail and "memory_bound_s" in detail:
        return {"compute": float(detail["compute_bound_s"]), "memory": float(detail["memory_bound_s"]),
                "host": float(sum(parts.get(k, 0.0) for k in HOST_PARTS)),
                "data": float(parts.get("data", 0.0)), "comm": float(parts.get("comm", 0.0))}
    return {k: float(v) for k, v in parts.items()}


def component_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("component.")]


def accuracy_delta(row: pd.Series, base: pd.Series | None) -> float | None:
    """Accuracy change in pp: the runner's delta against the matrix baseline, else computed from base."""
    delta = metric(row, "accuracy_delta_pp")
    if delta is not None:
        return delta
    acc, base_acc = metric(row, "accuracy"), (metric(base, "accuracy") if base is not None else None)
    return None if acc is None or base_acc is None else (acc - base_acc) * 100.0


def seed_accuracies(row: pd.Series) -> list[float]:
    """The per-seed accuracies behind a row's accuracy (empty for single-seed records)."""
    run = row.get("extra.accuracy_run")
    values = run.get("values") if isinstance(run, dict) else None
    return [float(v) for v in values] if values and all(v is not None for v in values) else []


def paired_accuracy_pp(row: pd.Series, base: pd.Series | None) -> tuple[float | None, list[float] | None]:
    """(row - base) accuracy in pp over seed-paired runs and its 95% interval (None: fewer than two pairs)."""
    mine, theirs = seed_accuracies(row), (seed_accuracies(base) if base is not None else [])
    if len(mine) >= 2 and len(mine) == len(theirs):
        return paired_delta_pp(mine, theirs)
    acc, base_acc = metric(row, "accuracy"), (metric(base, "accuracy") if base is not None else None)
    return (None if acc is None or base_acc is None else (acc - base_acc) * 100.0), None


def accuracy_delta_interval(row: pd.Series, base: pd.Series | None) -> tuple[float | None, list[float] | None]:
    """The runner's delta and interval against the matrix baseline when recorded, else computed from base."""
    if metric(row, "accuracy_delta_pp") is not None:
        stored = row.get("accuracy_delta_ci95_pp")
        return metric(row, "accuracy_delta_pp"), (list(stored) if isinstance(stored, (list, tuple)) else None)
    return paired_accuracy_pp(row, base)


def effect_text(interval: list[float] | None) -> str:
    """'effect' when the 95% interval excludes 0, 'within seed noise' when it holds 0, '' with one seed."""
    verdict = is_effect(interval)
    return "" if verdict is None else ("effect" if verdict else "within seed noise")


def brief(reason: object, limit: int = 160) -> str:
    """One line of a reason: a traceback's last line says most, a one-line reason stays as it is."""
    if not isinstance(reason, str) or not reason.strip():
        return ""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    text = lines[-1] if len(lines) > 1 else lines[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def has_values(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and frame[column].notna().any()
