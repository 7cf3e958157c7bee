"""Shared views of the records frame: the comparison context of a cell and its baseline cell.

Cells are compared only within a *context*: the same workload, preset, preset overrides and
target. Inside it the cell labelled "base" (the matrix's baseline) is the reference.
"""

from __future__ import annotations

import math
from typing import Iterator

import pandas as pd

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


def breakdown_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("breakdown.")]


def accuracy_delta(row: pd.Series, base: pd.Series | None) -> float | None:
    """Accuracy change in pp: the runner's delta against the matrix baseline, else computed from base."""
    delta = metric(row, "accuracy_delta_pp")
    if delta is not None:
        return delta
    acc, base_acc = metric(row, "accuracy"), (metric(base, "accuracy") if base is not None else None)
    return None if acc is None or base_acc is None else (acc - base_acc) * 100.0


def has_values(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and frame[column].notna().any()
