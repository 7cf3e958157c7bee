"""The data-pipeline and recompile tips on the device model: process vs thread workers, shared memory,
vision ops on the device, and the ragged last batch's extra compile.

All host figures are ratios measured on the reference host by `msbench calibrate pipeline-modes`
(hardware/calibration/pipeline_modes.py -> pipeline_modes.json) and applied in one call from
host_time (`data_time_ratio`), so the host-cost law of host_time.py stays the only absolute figure:

- `python_multiprocessing` (and `shared_mem`): the pipeline's per-sample time with process workers over
  thread workers, measured at 1 and 2 workers (beyond 2 the 2-worker ratio is carried, or part of the
  way from the 1-worker one: `tips.process_ratio_carry`, an estimate).
- `augment_device=ascend`: the measured share of the 1-worker time spent in the deterministic vision
  ops (timed eagerly, op by op, on the same samples) leaves the host; the device's vision units
  (DVPP: JPEGD for Decode, VPC for the others) take those pixels at the profile's `tips` rates, as a pipelined
  stage beside the host's: the data time is max(host remainder, DVPP).
- `drop_remainder=false`: the ragged last batch is a new input shape, so graph mode compiles the step
  once more per epoch. Compile seconds per graph op were measured on the CPU backend for each
  workload's tiny preset; the charge is that rate x the cell's op count, amortised over the epoch's
  steps, scaled to Ascend by an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from hardware.model.calibration_file import load_calibration
from hardware.model.profile import HardwareProfile
from msbench.errors import UserError
from msbench.resources import suite_path
from msbench.settings import Settings

CALIBRATION_FILE = suite_path("hardware/calibration/pipeline_modes.json")
SCHEMA = 1
PIXELS_1080P = 1920 * 1080

# The DVPP rates, the Ascend compile scale and the carry of the 2-worker ratio are estimates with ranges,
# carried by the profile (`profile.tips`, hardware/model/tip_estimates.py). CANN states that Atlas
# training products (Ascend 910, the `ascend910a` profile) do not support JPEGD: Decode cannot move there.
NO_JPEGD = {"ascend910a": "CANN: Atlas training products (Ascend 910) do not support the JPEGD decoder"}


@dataclass(frozen=True)
class PipelineModes:
    """One calibrated pipeline (workload x preset x data format) on the reference host."""

    process_ratio: Mapping[int, float]          # workers -> t(process, shm on) / t(thread)
    process_no_shm_ratio: Mapping[int, float]   # workers -> t(process, shm off) / t(thread)
    vision_shares: Mapping[str, float]          # deterministic vision op -> its share of the 1-worker time
    stored_pixels: int                          # pixels Decode reads per sample (0: no Decode)
    output_pixels: int                          # pixels of one sample after the vision ops
    compile_s_per_op: float                     # CPU compile seconds per graph op, for a new input shape
    calibration_hash: str


def pipeline_modes(workload: str, preset: str, data_format: str, path: Path = CALIBRATION_FILE) -> PipelineModes:
    """The calibrated modes of a cell's pipeline; a missing entry names the command that measures it."""
    digest, data = load_calibration(path, SCHEMA, "msbench calibrate pipeline-modes")
    key = f"{workload}/{preset}/{data_format}"
    entry, compile_entry = data["pipelines"].get(key), data["compile"].get(workload)
    if entry is None or compile_entry is None:
        raise UserError(f"pipeline modes {key!r} are not in {path.name}; measure them with: msbench calibrate "
                        f"pipeline-modes {workload} --preset {preset} --data-format {data_format}")
    return PipelineModes(
        process_ratio={int(w): r for w, r in entry["process_ratio"].items()},
        process_no_shm_ratio={int(w): r for w, r in entry["process_no_shm_ratio"].items()},
        vision_shares=dict(entry["vision_shares"]),
        stored_pixels=entry["stored_pixels"], output_pixels=entry["output_pixels"],
        compile_s_per_op=compile_entry["compile_s_per_op"], calibration_hash=digest)


def mode_ratio(settings: Settings, modes: PipelineModes | None, workers: int, profile: HardwareProfile) -> float:
    """Process over thread workers at `workers`, with or without shared memory: measured at 1 and 2;
    beyond 2, the profile's carry of the way from the 1-worker to the 2-worker ratio."""
    if not settings.python_multiprocessing:
        return 1.0
    table = _need(modes, "python_multiprocessing").process_ratio if settings.shared_mem \
        else _need(modes, "shared_mem").process_no_shm_ratio
    if workers <= 2:
        return table[max(workers, 1)]
    carry = profile.tips.process_ratio_carry
    return table[2] * carry + table[1] * (1.0 - carry)         # exactly the 2-worker ratio at carry 1


def moved_ops(modes: PipelineModes, profile_name: str) -> tuple[str, ...]:
    """The vision ops that leave the host on this chip (Decode stays where JPEGD is missing)."""
    return tuple(op for op in sorted(modes.vision_shares) if not (op == "Decode" and profile_name in NO_JPEGD))


def dvpp_seconds_per_sample(modes: PipelineModes, profile: HardwareProfile) -> float:
    """Device vision-unit seconds for one sample's moved ops (JPEGD for Decode, VPC for the rest)."""
    ops = moved_ops(modes, profile.name)
    seconds = modes.stored_pixels / (profile.tips.jpegd_fps * PIXELS_1080P) if "Decode" in ops else 0.0
    if any(op != "Decode" for op in ops):
        seconds += modes.output_pixels / (profile.tips.vpc_fps * PIXELS_1080P)
    return seconds


def data_time_ratio(settings: Settings, modes: PipelineModes | None, workers: int, profile: HardwareProfile) -> float:
    """The one factor host_time applies to the pipeline's host seconds for these knobs."""
    ratio = mode_ratio(settings, modes, workers, profile)
    if settings.augment_device == "ascend":
        moved = _need(modes, "augment_device")
        ratio *= max(1.0 - sum(moved.vision_shares[op] for op in moved_ops(moved, profile.name)), 0.0)
    return ratio


def device_vision_seconds(settings: Settings, modes: PipelineModes | None, samples: int,
                          profile: HardwareProfile) -> float:
    """Seconds the device's vision units spend on one step's samples (0 unless augment_device=ascend)."""
    if settings.augment_device != "ascend":
        return 0.0
    return dvpp_seconds_per_sample(_need(modes, "augment_device"), profile) * samples


def recompile_seconds(settings: Settings, modes: PipelineModes | None, ops: int, epoch_steps: int,
                      profile: HardwareProfile) -> float:
    """Per step: the ragged last batch's one extra compile per epoch, amortised over the epoch's steps."""
    if settings.drop_remainder:
        return 0.0
    scale = profile.tips.ascend_compile_scale if profile.profile.kind == "npu" else 1.0
    return _need(modes, "drop_remainder").compile_s_per_op * ops * scale / max(epoch_steps + 1, 1)


def tip_estimates_unread(settings: Settings, profile: HardwareProfile, workers: int) -> set[str]:
    """The `tips.*` estimate keys a prediction with these settings never reads (hardware/model/estimates.py)."""
    read = set()
    if settings.python_multiprocessing and workers > 2:
        read.add("tips.process_ratio_carry")
    if settings.augment_device == "ascend":
        read.add("tips.vpc_fps")
        if profile.name not in NO_JPEGD:
            read.add("tips.jpegd_fps")
    if not settings.drop_remainder and profile.profile.kind == "npu":
        read.add("tips.ascend_compile_scale")
    if settings.memory_optimize_level == "O1":
        read.add("tips.somas_packing_loss")
    return {e.key for e in profile.estimates if e.key.startswith("tips.")} - read


@dataclass(frozen=True)
class HostWithModes:
    """A host cost (hardware.model.host_cost.HostCost) with its pipeline's calibrated modes: what
    `predict` takes as `host`, so its signature stays (graph, settings, profile, host)."""

    host: Any
    modes: PipelineModes

    @property
    def stages(self) -> Any:
        return self.host.stages

    @property
    def consumer_s(self) -> float:
        return self.host.consumer_s

    @property
    def gil_fraction(self) -> float:
        return self.host.gil_fraction

    @property
    def bytes_per_sample(self) -> int:
        return self.host.bytes_per_sample

    @property
    def calibration_hash(self) -> str:
        return f"{self.host.calibration_hash}+{self.modes.calibration_hash}"


def modes_of(host: Any) -> PipelineModes | None:
    """The calibrated modes a host cost carries (None for a bare host cost)."""
    return host.modes if isinstance(host, HostWithModes) else None


def _need(modes: PipelineModes | None, knob: str) -> PipelineModes:
    if modes is None:
        raise UserError(f"{knob}: the device model needs this pipeline's entry in {CALIBRATION_FILE.name}; "
                        "measure it with: msbench calibrate pipeline-modes WORKLOAD --preset PRESET")
    return modes
