"""The LLM-scale claims (issue 15), appended to the claims list of msbench/report/claims.py.

  optimizer_shard  MindSpore's parallel optimizer cuts per-card memory and, overlapped, keeps the
                   communication share of the step low ("42% -> 18%" is the seed's figure).
  llm_recompute    At LLM scale selective recompute (the attention core) costs far less time than
                   full recompute (Korthikanti et al. 2022: ~2-4% against ~30-40% overhead).
  pipeline_bubble  More micro-batches shrink the 1F1B bubble (p-1)/(m+p-1) (Narayanan et al. 2021).
  memory_175b      ZeRO-style sharding plus recompute cut a 175B model's memory need by about 3x
                   ("640 GB -> 210 GB"): which layouts fit the 64 GB cards, and at what throughput.
The last compares an OOM cell's predicted peak too, so its pairs read ok and oom records alike.
"""

from __future__ import annotations

from typing import Iterator

import pandas as pd

from msbench.report.claim_kinds import Check, Claim, pairs, same_except
from msbench.report.frame import CONTEXT, KNOBS, metric, ratio

COMM_PARTS = ("component.tp_comm", "component.pp_send", "component.dp_comm")


def comm_share(row: pd.Series) -> float | None:
    parts = [metric(row, p) for p in COMM_PARTS]
    if all(p is None for p in parts):
        return None
    return ratio(sum(p or 0.0 for p in parts), metric(row, "step_time_s"))


def shard_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    return {"memory_ratio": ratio(metric(alt, "peak_memory_bytes"), metric(ref, "peak_memory_bytes")),
            "comm_share_after": comm_share(alt)}


def recompute_measure(full: pd.Series, selective: pd.Series) -> dict[str, float | None]:
    return {"speedup": ratio(metric(selective, "throughput"), metric(full, "throughput")),
            "memory_ratio": ratio(metric(selective, "peak_memory_bytes"), metric(full, "peak_memory_bytes"))}


def bubble_measure(few: pd.Series, many: pd.Series) -> dict[str, float | None]:
    return {"speedup": ratio(metric(many, "throughput"), metric(few, "throughput")),
            "bubble_share_after": ratio(metric(many, "component.pp_bubble"), metric(many, "step_time_s"))}


def fewer_and_more_micro_batches(frame: pd.DataFrame) -> Iterator[tuple[pd.Series, pd.Series]]:
    """Pairs of pipelined ok cells that differ only in micro_batches (and so the micro-batch size)."""

    for group in same_except(frame, {"micro_batches"}):
        rows = [r for r in group if int(r["pipeline_stages"]) > 1]
        for few in rows:
            for many in rows:
                if int(many["micro_batches"]) > int(few["micro_batches"]):
                    yield few, many


def memory_175b_measure(plain: pd.Series, sharded: pd.Series) -> dict[str, float | None]:
    fits = 1.0 if sharded["status"] == "ok" else 0.0
    return {"memory_ratio": ratio(metric(sharded, "peak_memory_bytes"), metric(plain, "peak_memory_bytes")),
            "fits": fits, "throughput_per_device": metric(sharded, "throughput_per_device")}


def plain_and_sharded_175b(frame: pd.DataFrame) -> Iterator[tuple[pd.Series, pd.Series]]:
    """gpt3-175b cells, ok or OOM: no sharding and no recompute against optimizer_shard with full or
    selective recompute, everything else equal."""

    cells = frame[(frame["workload"] == "gpt3-175b") & frame["status"].isin(["ok", "oom"])]
    if cells.empty:
        return
    varied = {"optimizer_shard", "recompute"}
    keys = CONTEXT + [k for k in KNOBS if k not in varied and k in cells.columns]
    grouped = cells.astype({k: "object" for k in keys}).fillna({k: "-" for k in keys}).groupby(keys, sort=True)
    for _, group in grouped:
        plain = [r for _, r in group.iterrows() if not r["optimizer_shard"] and r["recompute"] == "none"]
        sharded = [r for _, r in group.iterrows() if r["optimizer_shard"] and r["recompute"] != "none"]
        for p in plain:
            for s in sharded:
                yield p, s


def llm_claims() -> tuple[Claim, ...]:

    return (
        Claim("optimizer_shard", "The parallel optimizer (optimizer_shard) cuts per-card memory, and overlapped "
              "communication stays a small share of the step (42% -> 18% in the seed's example)",
              "cells with optimizer_shard false and true, otherwise equal",
              (Check("memory_ratio", "memory ratio", 0.7, 0.9, higher_is_better=False, unit="ratio"),
               Check("comm_share_after", "communication share with it", 0.18, 0.42, higher_is_better=False,
                     unit="pct")),
              pairs({"optimizer_shard": (False,)}, {"optimizer_shard": (True,)}), shard_measure),
        Claim("llm_recompute", "At LLM scale selective recompute is much cheaper than full recompute "
              "(Korthikanti et al. 2022: a few % against 30-40% overhead)",
              "cells with recompute full and selective, otherwise equal",
              (Check("speedup", "selective over full speed-up", 1.2, 1.05),
               Check("memory_ratio", "memory vs full", 1.5, 2.5, higher_is_better=False, unit="ratio",
                     required=False)),
              pairs({"recompute": ("full",)}, {"recompute": ("selective",)}), recompute_measure),
        Claim("pipeline_bubble", "More micro-batches shrink the pipeline bubble (p-1)/(m+p-1) and speed up a "
              "pipelined step", "pipelined cells that differ only in micro_batches",
              (Check("speedup", "speed-up with more micro-batches", 1.1, 1.0),
               Check("bubble_share_after", "bubble share after", 0.15, 0.3, higher_is_better=False, unit="pct")),
              fewer_and_more_micro_batches, bubble_measure),
        Claim("memory_175b", "Sharding the optimizer and recomputing cut a 175B model's memory need about 3x "
              "(640 GB -> 210 GB), so it fits 64 GB cards",
              "gpt3-175b cells (ok or OOM) without optimizer_shard and recompute, and with both",
              (Check("memory_ratio", "memory ratio", 0.4, 0.7, higher_is_better=False, unit="ratio"),
               Check("fits", "fits the card (1 = yes)", 1.0, 1.0, unit="ratio")),
              plain_and_sharded_175b, memory_175b_measure),
    )
