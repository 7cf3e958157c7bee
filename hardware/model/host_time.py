"""Host-side time of a step: op dispatch, the per-step round trip, the data pipeline.

- Dispatch. PyNative pays Python + framework dispatch for every op; graph mode at O0/O1 launches
  kernel by kernel from the host runtime; O2 sinks the whole graph and pays only a per-task
  scheduling cost on the device. On a separate accelerator the host runs ahead of the device
  (asynchronous launch), so a kernel costs max(device time, dispatch); on the CPU the host *is*
  the device and the two add up.
- Round trip. Without dataset sink every step is launched from the host and its loss fetched
  back; with sink, one round trip covers `sink_size` steps (or an epoch for sink_size=-1).
- Data pipeline. The per-sample host cost of the workload's real mindspore.dataset pipeline,
  measured on the reference host (this CPU machine kind), is scaled by the profile's relative
  core speed and divided by the workers that get a core. It overlaps device time unless
  prefetch is 0, or the pipeline shares cores with the device (the CPU target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from hardware.model.compute import Kernel
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings


class HostCostLike(Protocol):
    """What the model needs from `hardware.model.host_cost.HostCost` (measured on the reference host)."""

    per_sample_s: float        # host seconds per sample of the cell's data pipeline, one worker
    bytes_per_sample: int      # bytes of one sample as fed to the network (host -> device copy)


@dataclass(frozen=True)
class HostTime:
    kernel_path_s: float       # device kernels including dispatch stalls
    device_s: float            # device kernels alone
    roundtrip_s: float         # per-step host round trip (amortised over a sink round)
    transfer_s: float          # host -> device copy of the batch (0 under sink: the queue prefetches)
    data_s: float              # host data-pipeline time for one step's samples
    data_overlapped: bool

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


def kernel_path_seconds(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile) -> float:
    """Device time with dispatch: async hosts hide dispatch behind longer kernels, O2 and sync hosts add it."""
    per_kernel = dispatch_us(settings, profile) * 1e-6
    hidden = profile.launch.asynchronous and not (settings.mode == "graph" and settings.jit_level == "O2")
    if hidden:
        return sum(max(k.time_s, per_kernel) for k in kernels)
    return sum(k.time_s for k in kernels) + per_kernel * len(kernels)


def steps_per_round(settings: Settings, epoch_steps: int) -> int:
    if not settings.sink:
        return 1
    return settings.sink_size if settings.sink_size > 0 else max(epoch_steps, 1)


def data_seconds(samples: int, settings: Settings, profile: HardwareProfile, host: HostCostLike) -> float:
    workers = max(1, min(settings.workers, profile.host.cores_per_device))
    return host.per_sample_s * samples / (profile.host.core_speed * workers)


def host_time(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile, host: HostCostLike,
              samples_per_step: int, epoch_steps: int) -> HostTime:
    device = sum(k.time_s for k in kernels)
    path = kernel_path_seconds(kernels, settings, profile)
    roundtrip = profile.launch.step_us * 1e-6 / steps_per_round(settings, epoch_steps)
    transfer = 0.0 if settings.sink else host.bytes_per_sample * samples_per_step / (profile.host.link_gbps * 1e9)
    overlapped = settings.prefetch > 0 and not profile.host.shares_device
    return HostTime(kernel_path_s=path, device_s=device, roundtrip_s=roundtrip, transfer_s=transfer,
                    data_s=data_seconds(samples_per_step, settings, profile, host), data_overlapped=overlapped)
