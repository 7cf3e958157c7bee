"""Host-side time of a step: op dispatch, the per-step round trip, the data pipeline.

- Dispatch. PyNative pays Python + framework dispatch for every op; graph mode at O0/O1 launches
  kernel by kernel from the host runtime; O2 sinks the whole graph and pays only a per-task
  scheduling cost on the device. On a separate accelerator the host runs ahead of the device
  (asynchronous launch), so a kernel costs max(device time, dispatch); on the CPU the host *is*
  the device and the two add up.
- Round trip. Without dataset sink every step is launched from the host and its loss fetched
  back; with sink, one round trip covers `sink_size` steps (or an epoch for sink_size=-1).
- Data pipeline. The per-sample host cost of the workload's real mindspore.dataset pipeline,
  calibrated on the reference host at 1 and 2 workers (hardware/calibration/host_cost.json), is
  scaled by the profile's relative core speed over the workers that get a core, by Amdahl's law
  (G. M. Amdahl, "Validity of the single processor approach to achieving large scale computing
  capabilities", AFIPS 1967): t(w) = s + (t2 - s) * 2 / w for w >= 2, t(1) = t1, where s, the
  serial part, is what the two measured points imply, 2*t2 - t1, kept within [0, t2]. The time spent
  inside the pipeline's Python callables is recorded but is not taken as serial: those callables
  spend most of it in C code that releases the GIL (YOLOv5s full: 37.6 of 38.5 ms/sample inside
  Python callables, yet 21.7 ms/sample at 2 workers on the quiet reference host), so only the
  measured scaling says how much is serial. The law meets both measurements exactly. The pipeline
  overlaps device time unless prefetch is 0, or it shares cores with the device (the CPU target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from hardware.model.compute import Kernel
from hardware.model.pipeline_modes import data_time_ratio, device_vision_seconds, modes_of, recompile_seconds
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings


class HostCostLike(Protocol):
    """What the model needs from `hardware.model.host_cost.HostCost` (calibrated on the reference host)."""

    per_sample_s: float            # host seconds per sample of the cell's data pipeline, one worker
    per_sample_2_workers_s: float  # the same with two workers
    bytes_per_sample: int          # bytes of one sample as fed to the network (host -> device copy)
    calibration_hash: str          # of the calibration file the figures come from


@dataclass(frozen=True)
class HostTime:
    kernel_path_s: float       # device kernels including dispatch stalls
    device_s: float            # device kernels alone
    roundtrip_s: float         # per-step host round trip (amortised over a sink round)
    transfer_s: float          # host -> device copy of the batch (0 under sink: the queue prefetches)
    data_s: float              # data-pipeline time for one step's samples (host, or the device's vision units)
    data_overlapped: bool
    recompile_s: float = 0.0   # the ragged last batch's extra compile per epoch, per step (pipeline_modes.py)

    @property
    def dispatch_s(self) -> float:
        return self.kernel_path_s - self.device_s


def dispatch_key(settings: Settings) -> str:
    """The `[launch]` constant that prices one kernel's dispatch under these settings."""
    if settings.mode == "pynative":
        return "pynative_us"
    if settings.jit_level == "O2":
        return "graph_o2_us"
    if settings.jit_level == "O1" or settings.graph_kernel:
        return "graph_o1_us"
    return "graph_o0_us"


def dispatch_us(settings: Settings, profile: HardwareProfile) -> float:
    return float(getattr(profile.launch, dispatch_key(settings)))


@dataclass(frozen=True)
class KernelSlot:
    """One kernel on the step's critical path: its host dispatch, its device time, and the slot both take."""

    dispatch_s: float
    device_s: float
    overlapped: bool           # dispatch runs ahead of the device (slot = max) rather than before it (sum)

    @property
    def slot_s(self) -> float:
        return max(self.device_s, self.dispatch_s) if self.overlapped else self.device_s + self.dispatch_s


def kernel_slots(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile) -> list[KernelSlot]:
    """Async hosts hide dispatch behind longer kernels; O2 (a per-task device cost) and sync hosts add it."""
    per_kernel = dispatch_us(settings, profile) * 1e-6
    hidden = profile.launch.asynchronous and not (settings.mode == "graph" and settings.jit_level == "O2")
    return [KernelSlot(per_kernel, k.time_s, hidden) for k in kernels]


def kernel_path_seconds(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile) -> float:
    """Device time with dispatch (the sum of the kernels' slots)."""
    return sum(s.slot_s for s in kernel_slots(kernels, settings, profile))


def steps_per_round(settings: Settings, epoch_steps: int) -> int:
    if not settings.sink:
        return 1
    return settings.sink_size if settings.sink_size > 0 else max(epoch_steps, 1)


def serial_per_sample_s(host: HostCostLike) -> float:
    """The part of the pipeline's per-sample time that more workers do not divide (module docstring)."""
    one, two = host.per_sample_s, host.per_sample_2_workers_s
    return min(two, max(2.0 * two - one, 0.0))


def per_sample_seconds(workers: int, host: HostCostLike) -> float:
    """Reference-host seconds per sample at `workers` pipeline workers: measured at 1 and 2, Amdahl beyond."""
    if workers <= 1:
        return host.per_sample_s
    serial = serial_per_sample_s(host)
    return serial + (host.per_sample_2_workers_s - serial) * 2.0 / workers


def pipeline_workers(settings: Settings, profile: HardwareProfile) -> int:
    """Data-pipeline workers that get a host core of their own."""
    return max(1, min(settings.workers, profile.host.cores_per_device))


def data_seconds(samples: int, settings: Settings, profile: HardwareProfile, host: HostCostLike) -> float:
    """Host seconds at the cell's workers, times the measured ratio of its pipeline knobs; vision ops moved
    to the device are a pipelined stage of their own (pipeline_modes.py), so the slower stage sets the pace."""
    workers = pipeline_workers(settings, profile)
    modes = modes_of(host)
    host_s = (per_sample_seconds(workers, host) * samples / profile.host.core_speed
              * data_time_ratio(settings, modes, workers, profile.name))
    return max(host_s, device_vision_seconds(settings, modes, samples, profile.name))


def host_time(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile, host: HostCostLike,
              samples_per_step: int, epoch_steps: int, graph_ops: int = 0) -> HostTime:
    device = sum(k.time_s for k in kernels)
    path = kernel_path_seconds(kernels, settings, profile)
    roundtrip = profile.launch.step_us * 1e-6 / steps_per_round(settings, epoch_steps)
    transfer = 0.0 if settings.sink else host.bytes_per_sample * samples_per_step / (profile.host.link_gbps * 1e9)
    overlapped = settings.prefetch > 0 and not profile.host.shares_device
    return HostTime(kernel_path_s=path, device_s=device, roundtrip_s=roundtrip, transfer_s=transfer,
                    data_s=data_seconds(samples_per_step, settings, profile, host), data_overlapped=overlapped,
                    recompile_s=recompile_seconds(settings, modes_of(host), graph_ops, epoch_steps,
                                                  profile.profile.kind == "npu"))
