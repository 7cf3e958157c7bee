"""The data-pipeline and memory tips of issue 18 as claims, each read from pairs of cells that differ
only in its knob (the machinery of msbench/report/claims.py, whose list these are appended to):
process workers, shared memory, vision ops on the device, the ragged last batch, memory reuse (SOMAS).
"""

from __future__ import annotations

import pandas as pd

from msbench.report.claims import Check, Claim, pairs, speed
from msbench.report.frame import metric, ratio


def ragged_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    """What keeping the ragged batch costs: the throughput lost against dropping it."""
    kept = ratio(metric(alt, "throughput"), metric(ref, "throughput"))
    return {"throughput_cost": None if kept is None else 1.0 - kept}


def memory_measure(ref: pd.Series, alt: pd.Series) -> dict[str, float | None]:
    return {"memory_ratio": ratio(metric(alt, "peak_memory_bytes"), metric(ref, "peak_memory_bytes")),
            **speed(ref, alt)}


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
)
