"""Plots as PNG bytes, drawn on matplotlib Figure objects (no pyplot state, no display needed)."""

from __future__ import annotations

import io
import math
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from msbench.report.frame import base_of, component_columns, contexts, ok_cells

MAX_PANELS = 12
VERDICT_COLOURS = {"holds": "#2e7d32", "partly": "#f9a825", "does not hold": "#c62828", "no data": "#bdbdbd"}


def to_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def panels(count: int, width: float = 4.2, height: float = 3.4) -> tuple[Figure, list]:
    cols = min(3, count)
    rows = math.ceil(count / cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes[:count]


def each_context(table: pd.DataFrame, draw: Callable[[object, str, pd.DataFrame], None]) -> bytes | None:
    groups = [(f"{w} ({p})\n{t}", g) for (w, p, t), g in table.groupby(["workload", "preset", "target"], sort=True)]
    groups = groups[:MAX_PANELS]
    if not groups:
        return None
    fig, axes = panels(len(groups))
    for ax, (title, rows) in zip(axes, groups):
        draw(ax, title, rows)
    return to_png(fig)


def speedup_heatmap(effects: pd.DataFrame) -> bytes | None:
    """Speed-up of every knob change (rows) per workload and target (columns), log2 colour scale."""
    data = effects.dropna(subset=["speedup"])
    if data.empty:
        return None
    data = data.assign(where=data["workload"] + " (" + data["preset"] + ")\n" + data["target"])
    grid = data.pivot_table(index="label", columns="where", values="speedup", aggfunc="first")
    grid = grid.iloc[:40]
    fig = Figure(figsize=(2.2 + 1.6 * grid.shape[1], 1.0 + 0.32 * grid.shape[0]))
    ax = fig.subplots()
    values = np.log2(grid.to_numpy(dtype=float))
    limit = max(0.5, float(np.nanmax(np.abs(values))))
    image = ax.imshow(values, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), grid.columns, fontsize=8)
    ax.set_yticks(range(grid.shape[0]), grid.index, fontsize=8)
    for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
        if not math.isnan(v):
            ax.text(j, i, f"×{v:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, label="log2 speed-up vs baseline")
    ax.set_title("Throughput speed-up against the baseline cell")
    return to_png(fig)


def breakdown_bars(frame: pd.DataFrame) -> bytes | None:
    """Seconds per step split by component, per cell, for each context (where a breakdown exists)."""
    parts = component_columns(frame)
    ok = ok_cells(frame)
    if not parts or ok.empty:
        return None
    groups = [(name, rows) for name, rows in contexts(ok) if rows[parts].notna().any().any()][:MAX_PANELS]
    if not groups:
        return None
    fig, axes = panels(len(groups), width=5.0, height=0.6 + 0.28 * max(len(r) for _, r in groups))
    colours = dict(zip(parts, [f"C{i}" for i in range(len(parts))]))
    for ax, (name, rows) in zip(axes, groups):
        rows = rows.sort_values("label")
        left = np.zeros(len(rows))
        for col in parts:
            ms = rows[col].fillna(0.0).to_numpy(dtype=float) * 1000.0
            ax.barh(rows["label"], ms, left=left, color=colours[col], label=col.removeprefix("component."))
            left += ms
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("ms per step (components may overlap)", fontsize=7)
    axes[0].legend(fontsize=7)
    return to_png(fig)


def tradeoff_scatter(table: pd.DataFrame) -> bytes | None:
    """Throughput vs peak memory; Pareto front joined, cells over the accuracy tolerance crossed."""
    def draw(ax, title: str, rows: pd.DataFrame) -> None:
        plain = rows[~rows["pareto"] & ~rows["over_tolerance"]]
        front = rows[rows["pareto"]].sort_values("peak_gib")
        over = rows[rows["over_tolerance"]]
        ax.scatter(plain["peak_gib"], plain["throughput"], color="C0", s=18, label="cell")
        ax.plot(front["peak_gib"], front["throughput"], "o-", color="C2", label="Pareto front")
        ax.scatter(over["peak_gib"], over["throughput"], marker="x", color="C3", s=40, label="over accuracy tolerance")
        for _, r in front.iterrows():
            ax.annotate(r["label"], (r["peak_gib"], r["throughput"]), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("peak memory (GiB)", fontsize=7)
        ax.set_ylabel("samples/s", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    return each_context(table, draw) if not table.empty else None


def claims_grid(table: pd.DataFrame) -> bytes | None:
    """Verdict per claim (rows) and target (columns)."""
    if table.empty:
        return None
    shown = table.assign(verdict=[v + (" (uncertain)" if str(r).startswith("uncertain") else "") for v, r in
                                  zip(table["verdict"], table.get("robustness", [""] * len(table)))])
    grid = shown.pivot_table(index="claim", columns="target", values="verdict", aggfunc="first", sort=False)
    fig = Figure(figsize=(3.0 + 1.8 * grid.shape[1], 0.8 + 0.45 * grid.shape[0]))
    ax = fig.subplots()
    for i, claim in enumerate(grid.index):
        for j, target in enumerate(grid.columns):
            verdict = grid.loc[claim, target]
            ax.add_patch(_cell_patch(j, i, VERDICT_COLOURS.get(str(verdict).split(" (")[0], "#ffffff")))
            ax.text(j + 0.5, i + 0.5, verdict, ha="center", va="center", fontsize=8)
    ax.set_xlim(0, grid.shape[1])
    ax.set_ylim(grid.shape[0], 0)
    ax.set_xticks([j + 0.5 for j in range(grid.shape[1])], grid.columns, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(grid.shape[0])], [c[:60] + ("…" if len(c) > 60 else "") for c in grid.index],
                  fontsize=7)
    ax.set_title("Tuning-tip claims")
    return to_png(fig)


def _cell_patch(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="white")


def diff_bars(table: pd.DataFrame, limit: int = 25) -> bytes | None:
    """The largest flagged changes between the two commits: red = regression, green = improvement."""
    data = table[table["flag"].isin(["regression", "improvement"])].dropna(subset=["change"]).head(limit)
    if data.empty:
        return None
    fig = Figure(figsize=(8, 0.8 + 0.3 * len(data)))
    ax = fig.subplots()
    labels = [f"{w} {v[:30]} {t} · {m}" for w, v, t, m in zip(data["workload"], data["variant"], data["target"], data["metric"])]
    colours = ["#c62828" if f == "regression" else "#2e7d32" for f in data["flag"]]
    ax.barh(labels[::-1], data["change"].to_numpy(dtype=float)[::-1], color=colours[::-1])
    ax.axvline(0, color="black", linewidth=0.6)
    ax.tick_params(labelsize=7)
    ax.set_xlabel("change (% or pp as the metric says)")
    return to_png(fig)
