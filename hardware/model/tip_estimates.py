"""The tuning tips' mechanism constants that no component measurement pins down, with their ranges.

They are MindSpore-on-a-chip constants rather than datasheet figures, so no profile TOML states them;
every profile carries them (`HardwareProfile.tips`, at the central values) and lists them among its
`estimates` under `tips.<name>`, so a prediction names those it read (hardware/model/estimates.py) and
the report's robustness pass (msbench/report/uncertainty.py) predicts again at each end of their range,
as it does for a profile's own `[estimates]`. The profile's digest is its TOML's, so these change no
shipped prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

# DVPP rates in 1080p frames per second per chip, CANN 8.5 "JPEGD Performance Specifications" and
# "VPC Performance Specifications" (hiascend.com, aclcppdevg_03_0685 / aclpythondevg_01_0430): JPEGD
# totals of 512 to 2048 1080p FPS and VPC totals of 1080 to 4320 FPS across the products listed. Which
# table is which product is not stated per chip in what was read, so each rate is an `estimate`:
# the geometric middle of the published range, with the range.
JPEGD_FPS = {"central": 1024.0, "low": 512.0, "high": 2048.0}
VPC_FPS = {"central": 2160.0, "low": 1080.0, "high": 4320.0}

# Ascend graph compile (GE + kernel build) against the CPU backend's compile per op: estimate, no
# component-level comparison was found; MindSpore's docs advise the compile cache on Ascend because
# first-step compiles take minutes for large networks.
ASCEND_COMPILE_SCALE = {"central": 2.0, "low": 1.0, "high": 8.0}

# SOMAS' packing loss as a share of the dynamic pool's fragmentation: estimate, range 0..1 (no
# component-level measurement of SOMAS' plan against the pool was found; a static plan of known
# lifetimes cannot fragment more than the run-time pool, and packs without gaps at best).
SOMAS_PACKING_LOSS = {"central": 0.25, "low": 0.0, "high": 1.0}

# Process over thread workers beyond the 2 workers measured (hardware/calibration/pipeline_modes.json):
# the share of the way from the 1-worker to the 2-worker ratio that carries on. 1 (shipped): the 2-worker
# ratio, measured on a 2-core host where 2 workers and the consumer contend for the cores; 0: the
# 1-worker ratio, what a server with a free core per worker would see if the contention is all the
# difference. Estimate: no server measurement.
PROCESS_RATIO_CARRY = {"central": 1.0, "low": 0.0, "high": 1.0}


@dataclass(frozen=True)
class TipEstimates:
    """The central values; `with_estimate(profile, "tips.<field>", v)` gives a profile with one moved."""

    jpegd_fps: float = JPEGD_FPS["central"]
    vpc_fps: float = VPC_FPS["central"]
    ascend_compile_scale: float = ASCEND_COMPILE_SCALE["central"]
    somas_packing_loss: float = SOMAS_PACKING_LOSS["central"]
    process_ratio_carry: float = PROCESS_RATIO_CARRY["central"]


# (field, its range, why it is an estimate): the profile's `estimates` entries `tips.<field>`
TIP_RANGES: tuple[tuple[str, dict[str, float], str], ...] = (
    ("ascend_compile_scale", ASCEND_COMPILE_SCALE,
     "Ascend compile per op against the CPU backend's (drop_remainder=false): no component measurement"),
    ("jpegd_fps", JPEGD_FPS, "CANN JPEGD totals per product (augment_device=ascend); not stated per chip"),
    ("process_ratio_carry", PROCESS_RATIO_CARRY,
     "process/thread ratio beyond the 2 workers measured on a 2-core host (python_multiprocessing): "
     "0 = the 1-worker ratio, 1 = the 2-worker ratio"),
    ("somas_packing_loss", SOMAS_PACKING_LOSS,
     "SOMAS' packing loss against the pool's fragmentation (memory_optimize_level=O1): not measured"),
    ("vpc_fps", VPC_FPS, "CANN VPC totals per product (augment_device=ascend); not stated per chip"),
)
