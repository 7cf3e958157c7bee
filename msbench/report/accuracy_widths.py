"""How precise the claims' accuracy deltas are: per workload, the half-width of the 95% seed-paired interval
of each accuracy delta a claim reads (the figure of merit of the accuracy presets, docs/accuracy.md).

The deltas are a CPU-numerics proxy: real MindSpore on the CPU trains each workload's small accuracy preset
at the cell's numerics knobs (AMP level, loss scaling...), not the full network on an Ascend chip. Numerics do
not depend on the target, so a delta measured once is listed once, whatever chips share it.
"""

from __future__ import annotations

import pandas as pd

from msbench.report.frame import paired_accuracy_pp, seed_accuracies
from msbench.stats import mean_interval

PROXY_NOTE = ("An accuracy delta is a CPU-numerics proxy: real MindSpore on the CPU trains the workload's small "
              "accuracy preset with the cell's numerics knobs, seed-paired; it is not the full network's accuracy "
              "on Ascend.")
WIDTH_COLUMNS = ["workload", "claim", "delta", "accuracy_preset", "pairs", "delta_pp", "half_width_pp"]
DIFFS = "diffs_pp"           # the seed-paired differences themselves (not shown; the budget reads them)
NUMERICS_SHOWN = ("amp_level", "loss_scale", "keep_batchnorm_fp32", "batch_size", "grad_accum")


def numerics(row: pd.Series, reference: pd.Series) -> str:
    """The row's numerics knobs that differ from the reference's (its label when none do)."""
    shown = [f"{k}={row[k]}" for k in NUMERICS_SHOWN if k in row.index and str(row[k]) != str(reference.get(k))]
    return " ".join(shown) or str(row["label"])


def preset_of(row: pd.Series) -> str:
    run = row.get("extra.accuracy_run")
    return str(run.get("preset") or "") if isinstance(run, dict) else ""


def widths_table(frame: pd.DataFrame, claims: tuple) -> pd.DataFrame:
    """One row per workload, claim and distinct delta (changed vs reference numerics): the number of seed
    pairs, the mean delta (changed - reference) and the 95% interval's half-width, both in pp."""
    rows: dict[tuple[str, str, str], dict] = {}
    for claim in claims:
        if claim.accuracy_rows is None:
            continue
        ref_at, alt_at = claim.accuracy_rows
        for found in claim.find(frame):
            ref, alt = found[ref_at], found[alt_at]
            delta, interval = paired_accuracy_pp(alt, ref)
            if delta is None:
                continue
            name = f"{numerics(alt, ref)} vs {numerics(ref, alt)}"
            rows.setdefault((str(alt["workload"]), claim.key, name), {
                "workload": alt["workload"], "claim": claim.key, "delta": name, "accuracy_preset": preset_of(alt),
                "pairs": len(seed_accuracies(alt)) or 1, "delta_pp": delta,
                "half_width_pp": None if interval is None else (interval[1] - interval[0]) / 2,
                DIFFS: [(a - b) * 100.0 for a, b in zip(seed_accuracies(alt), seed_accuracies(ref))]})
    return pd.DataFrame(list(rows.values()), columns=[*WIDTH_COLUMNS, DIFFS])


def half_widths_by_seeds(diffs: list[float]) -> dict[int, float]:
    """The half-width the interval would have had with only the first n seed pairs, n = 2 .. all: what
    each seed buys (docs/generated/accuracy.md)."""
    return {n: mean_interval(diffs[:n])[1] for n in range(2, len(diffs) + 1)}
