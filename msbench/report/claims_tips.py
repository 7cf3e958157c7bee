"""The data-pipeline and memory tips of issue 18 as claims, each read from pairs of cells that differ
only in its knob (the machinery of msbench/report/claims.py, whose list these are appended to):
process workers, shared memory, vision ops on the device, the ragged last batch, memory reuse (SOMAS);
and the pool cap (max_device_memory), read from a batch-size sweep with and without the cap, OOM cells
included: the largest batch that fits under the cap and the first that runs out.
"""

from __future__ import annotations

from typing import Iterator

import pandas as pd

from msbench.report.claim_kinds import Check, Claim, micro_batch, pairs, same_except, speed
from msbench.report.frame import metric, ratio


def ragged_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    """What keeping the ragged batch costs: the throughput lost against dropping it."""
    kept = ratio(metric(alt, "throughput"), metric(ref, "throughput"))
    return {"throughput_cost": None if kept is None else 1.0 - kept}


def memory_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    return {"memory_ratio": ratio(metric(alt, "peak_memory_bytes"), metric(ref, "peak_memory_bytes")),
            **speed(ref, alt)}


def capped(row: pd.Series) -> bool:
    return not pd.isna(row.get("max_device_memory"))


def cap_sweeps(frame: pd.DataFrame) -> Iterator[tuple[pd.Series, ...]]:
    """Per cap: the capped cells of a batch sweep (ok or oom), then the uncapped cells at the same batch
    sizes, all else equal; only sweeps with at least two batch sizes under the cap."""
    for group in same_except(frame, {"batch_size", "max_device_memory"}, statuses=("ok", "oom")):
        rows = [r for r in group if micro_batch(r) is not None]
        for cap in sorted({float(r["max_device_memory"]) for r in rows if capped(r)}):
            mine = sorted((r for r in rows if capped(r) and float(r["max_device_memory"]) == cap), key=micro_batch)
            batches = {micro_batch(r) for r in mine}
            free = sorted((r for r in rows if not capped(r) and micro_batch(r) in batches), key=micro_batch)
            if len(batches) >= 2:
                yield (*mine, *free)


def cap_measure(*rows: pd.Series) -> dict[str, float | None]:
    """The cap, the largest batch that fits under it and the first that runs out (None: none in the
    sweep), and the largest capped batch as a share of the largest the uncapped chip fits."""
    def fits(side: list[pd.Series]) -> list[int]:
        return [micro_batch(r) for r in side if r["status"] == "ok"]

    under = [r for r in rows if capped(r)]
    free = [r for r in rows if not capped(r)]
    kept, oom = fits(under), [micro_batch(r) for r in under if r["status"] == "oom"]
    largest_free = max(fits(free), default=None)
    return {"cap_gib": float(under[0]["max_device_memory"]),
            "largest_fitting_batch": max(kept, default=None), "first_oom_batch": min(oom, default=None),
            "batch_kept": ratio(float(max(kept, default=0)), None if largest_free is None else float(largest_free))}


PIPELINE_SPEEDUP = Check("speedup", "speed-up", holds=1.05, partly=1.0)

TIP_CLAIMS: tuple[Claim, ...] = (
    Claim("python_multiprocessing", "Process workers (python_multiprocessing) beat thread workers for a "
          "pipeline with Python transforms", "cells with python_multiprocessing false and true, otherwise equal",
          (PIPELINE_SPEEDUP,),
          pairs({"python_multiprocessing": (False,)}, {"python_multiprocessing": (True,)}), speed),
    Claim("shared_mem", "Shared memory (set_enable_shared_mem) speeds process workers up",
          "cells with python_multiprocessing true and shared_mem false and true, otherwise equal",
          (PIPELINE_SPEEDUP,),
          pairs({"python_multiprocessing": (True,), "shared_mem": (False,)},
                {"python_multiprocessing": (True,), "shared_mem": (True,)}), speed),
    Claim("augment_device", "Running Decode/Resize/Normalize on the NPU (DVPP) lifts a data-bound CNN",
          "cells with augment_device cpu and ascend, otherwise equal",
          (PIPELINE_SPEEDUP,), pairs({"augment_device": ("cpu",)}, {"augment_device": ("ascend",)}), speed),
    Claim("drop_remainder", "Keeping the ragged last batch (drop_remainder=false) costs a recompile every epoch",
          "cells with drop_remainder true and false at a batch size that leaves a ragged batch, otherwise equal",
          (Check("throughput_cost", "throughput lost", holds=0.01, partly=0.001, unit="pct"),),
          pairs({"drop_remainder": (True,)}, {"drop_remainder": (False,)}), ragged_measure),
    Claim("memory_reuse", "memory_optimize_level=O1 (SOMAS memory reuse) lowers peak memory without slowing the step",
          "cells with memory_optimize_level O0 and O1, otherwise equal",
          (Check("memory_ratio", "memory ratio", holds=0.95, partly=0.99, higher_is_better=False, unit="ratio"),
           Check("speedup", "speed-up", holds=1.0, partly=0.97, required=False)),
          pairs({"memory_optimize_level": ("O0",)}, {"memory_optimize_level": ("O1",)}), memory_measure),
    Claim("max_device_memory", "A max_device_memory cap runs the pool out of memory at a batch size the "
          "uncapped chip fits (the largest that fits under the cap, and the first that does not)",
          "a batch_size sweep (ok and oom cells) with max_device_memory set, and the same batch sizes unset, "
          "otherwise equal",
          (Check("cap_gib", "cap", 0.0, 0.0, unit="gib", required=False, graded=False),
           Check("largest_fitting_batch", "largest batch that fits", 0.0, 0.0, unit="batch", required=False,
                 graded=False),
           Check("first_oom_batch", "first OOM batch", 0.0, 0.0, unit="batch", required=False, graded=False),
           Check("batch_kept", "largest batch under the cap / uncapped", holds=0.95, partly=0.99,
                 higher_is_better=False, unit="ratio")),
          cap_sweeps, cap_measure),
)
