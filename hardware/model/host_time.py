"""Host-side time of a step: op dispatch, the per-step round trip, the data pipeline.

- Dispatch. PyNative pays Python + framework dispatch for every op; graph mode at O0/O1 launches
  kernel by kernel from the host runtime; O2 sinks the whole graph and pays only a per-task
  scheduling cost on the device. On a separate accelerator the host runs ahead of the device
  (asynchronous launch), so a kernel costs max(device time, dispatch); on the CPU the host *is*
  the device and the two add up.
- Round trip. Without dataset sink every step is launched from the host and its loss fetched
  back; with sink, one round trip covers `sink_size` steps (or an epoch for sink_size=-1).
  Without sink the round trip also holds the batch's hand-over, serial with the device: Model.train's
  non-sink loop runs on one Python thread, `for inputs in dataset_helper: outputs =
  train_network(*inputs); callbacks.step_end(...)` (mindspore/python/mindspore/train/model.py,
  `_train_process`), and LossMonitor's step_end reads the loss with `asnumpy()` every step, whatever
  its print interval (train/callback/_loss_monitor.py), which waits for the device. So the thread
  that takes the next batch from the iterator (numpy -> Tensor, the calibrated `consumer_s` per
  sample) is idle while the device runs and the device is idle while it works: the hand-over adds
  to the step, and so does the rest of that loop's host work (`launch.nonsink_us`, from the one public
  step trace of a non-sink run; hardware/calibration/nonsink.py states the sources and derives the terms).
  A host that is the device (the CPU target) already serialises its pipeline with the step.
- Data pipeline. mindspore.dataset runs every operation (reader, each map, batch) in its own
  worker threads, `num_parallel_workers` of them, with queues between operations, so a pipeline is a
  tandem of stages whose throughput is that of its slowest one (MindSpore docs, "Optimizing the Data
  Processing": each op's parallelism and the queue sizes set the pipeline's speed; the bottleneck law
  of operational analysis, P. J. Denning and J. P. Buzen, "The Operational Analysis of Queueing
  Network Models", ACM Computing Surveys 10(3), 1978: X <= min_k c_k / D_k for a stage of demand D_k
  served by c_k servers, and X <= C / sum_k D_k for C shared cores). Per sample at w workers on
  C host cores, with every demand measured at one worker on the reference host
  (hardware/calibration/host_cost.json):
      t(w) = max( max_stage cpu / min(w, C),       each thread's work divided over its workers
                  g * sum_stage python,            Python bytecode holds the GIL: serial in thread mode
                  consumer            (no sink),   the Python iterator is one thread
                  (sum_stage cpu + consumer) / C ) all of it shares C cores
  scaled by the profile's relative core speed. g, the GIL-held share of the Python callables, is
  measured by replaying them in one and in two threads (numpy/PIL release the GIL for most of
  their time). The pipeline overlaps device time unless prefetch is 0, or it shares cores with the
  device (the CPU target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from hardware.model.compile_mode import compile_mode
from hardware.model.compute import Kernel
from hardware.model.pipeline_modes import data_time_ratio, device_vision_seconds, modes_of, recompile_seconds
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings


class StageLike(Protocol):
    """What the law needs of one pipeline thread (`hardware.model.host_cost.PipelineStage`)."""

    cpu_s: float               # CPU seconds per sample at one worker on the reference host
    python_s: float            # of which inside Python callables


class HostCostLike(Protocol):
    """What the model needs from `hardware.model.host_cost.HostCost` (calibrated on the reference host)."""

    stages: Sequence[StageLike]    # the pipeline's threads at one worker
    consumer_s: float              # the Python iterator, per sample (absent under dataset sink)
    gil_fraction: float            # GIL-held share of the Python callables' time
    bytes_per_sample: int          # bytes of one sample as fed to the network (host -> device copy)
    calibration_hash: str          # of the calibration file the figures come from


@dataclass(frozen=True)
class HostTime:
    kernel_path_s: float       # device kernels including dispatch stalls
    device_s: float            # device kernels alone
    roundtrip_s: float         # per-step host round trip (amortised over a sink round); without sink it
                               # includes the batch's hand-over (handover_seconds) and the rest of the loop
                               # (nonsink_loop_seconds), serial with the device
    transfer_s: float          # host -> device copy of the batch (0 under sink: the queue prefetches)
    data_s: float              # data-pipeline time for one step's samples (host, or the device's vision units)
    data_overlapped: bool
    recompile_s: float = 0.0   # the ragged last batch's extra compile per epoch, per step (pipeline_modes.py)

    @property
    def dispatch_s(self) -> float:
        return self.kernel_path_s - self.device_s


def dispatch_us(settings: Settings, profile: HardwareProfile) -> float:
    return float(getattr(profile.launch, compile_mode(settings, profile).dispatch_key))


@dataclass(frozen=True)
class KernelSlot:
    """One kernel on the step's critical path: its host dispatch, its device time, and the slot both take."""

    dispatch_s: float
    device_s: float
    overlapped: bool           # dispatch runs ahead of the device (slot = max) rather than before it (sum)

    @property
    def slot_s(self) -> float:
        return slot_seconds(self.device_s, self.dispatch_s, self.overlapped)


def slot_seconds(device_s: float, dispatch_s: float, overlapped: bool) -> float:
    return max(device_s, dispatch_s) if overlapped else device_s + dispatch_s


@dataclass(frozen=True)
class Dispatch:
    """What each kernel's slot adds to it: `per_kernel_s` of dispatch, hidden behind the kernel (async hosts)
    or added to it (O2's per-task device cost, sync hosts)."""
    per_kernel_s: float
    hidden: bool

    @classmethod
    def of(cls, settings: Settings, profile: HardwareProfile) -> "Dispatch":
        return cls(dispatch_us(settings, profile) * 1e-6, compile_mode(settings, profile).dispatch_hidden)

    def slots(self, kernels: Sequence[Kernel]) -> list[KernelSlot]:
        return [KernelSlot(self.per_kernel_s, k.time_s, self.hidden) for k in kernels]


def kernel_path_seconds(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile) -> float:
    """Device time with dispatch: the sum of the kernels' slots, as `Dispatch.slots` gives them, summed in the
    same order without building a slot per kernel (a full-size cell's estimate ends sum ~10^5 of them)."""
    dispatch = Dispatch.of(settings, profile)
    return sum(slot_seconds(k.time_s, dispatch.per_kernel_s, dispatch.hidden) for k in kernels)


def steps_per_round(settings: Settings, epoch_steps: int) -> int:
    if not settings.sink:
        return 1
    return settings.sink_size if settings.sink_size > 0 else max(epoch_steps, 1)


@dataclass(frozen=True)
class PipelineBound:
    """The terms of the pipelined law (module docstring), reference-host seconds per sample."""

    stage_s: float             # the slowest thread, its work divided over min(workers, cores)
    gil_s: float               # GIL-serial Python work
    consumer_s: float          # the Python iterator (0 under sink)
    cores_s: float             # all the work over the cores

    @property
    def seconds(self) -> float:
        return max(self.stage_s, self.gil_s, self.consumer_s, self.cores_s)


def pipeline_bound(workers: int, cores: int, sink: bool, host: HostCostLike) -> PipelineBound:
    parallel = max(1, min(workers, cores))
    consumer = 0.0 if sink else host.consumer_s
    work = sum(s.cpu_s for s in host.stages)
    return PipelineBound(stage_s=max((s.cpu_s for s in host.stages), default=0.0) / parallel,
                         gil_s=host.gil_fraction * sum(s.python_s for s in host.stages),
                         consumer_s=consumer, cores_s=(work + consumer) / max(1, cores))


def per_sample_seconds(workers: int, cores: int, sink: bool, host: HostCostLike) -> float:
    """Reference-host seconds per sample at `workers` pipeline workers on `cores` cores: the bottleneck."""
    return pipeline_bound(workers, cores, sink, host).seconds


def pipeline_workers(settings: Settings, profile: HardwareProfile) -> int:
    """Data-pipeline workers that get a host core of their own."""
    return max(1, min(settings.workers, profile.host.cores_per_device))


def data_seconds(samples: int, settings: Settings, profile: HardwareProfile, host: HostCostLike) -> float:
    """Host seconds at the cell's workers (the bottleneck law), times the measured ratio of its pipeline knobs;
    vision ops moved to the device are a pipelined stage of their own (pipeline_modes.py): the slower sets the pace."""
    modes = modes_of(host)
    per_sample = per_sample_seconds(settings.workers, profile.host.cores_per_device, settings.sink, host)
    host_s = (per_sample * samples / profile.host.core_speed
              * data_time_ratio(settings, modes, pipeline_workers(settings, profile), profile))
    return max(host_s, device_vision_seconds(settings, modes, samples, profile))


def nonsink_loop_seconds(settings: Settings, profile: HardwareProfile) -> float:
    """Without sink, the rest of the non-sink loop's host work per step beyond the hand-over, the copy and the
    round trip (`launch.nonsink_us`: MindInsight's step trace shows it as the iteration gap, with the data queue
    full), serial with a separate device; 0 under sink and on a host that is the device."""
    if settings.sink or profile.host.shares_device:
        return 0.0
    return profile.launch.nonsink_us * 1e-6


def handover_seconds(samples: int, settings: Settings, profile: HardwareProfile, host: HostCostLike) -> float:
    """Without sink, the Python iterator's hand-over of one step's batch (the calibrated consumer CPU per
    sample, scaled by the host's core speed), on the thread that then launches the step and waits for its
    loss: serial with a separate device. 0 under sink (the device queue is fed by the pipeline's own
    thread) and on a host that is the device (its pipeline time already adds to the step)."""
    if settings.sink or profile.host.shares_device:
        return 0.0
    return host.consumer_s * samples / profile.host.core_speed


def host_time(kernels: Sequence[Kernel], settings: Settings, profile: HardwareProfile, host: HostCostLike,
              samples_per_step: int, epoch_steps: int, graph_ops: int = 0, device_s: float | None = None) -> HostTime:
    """`device_s`: the kernels' summed time, when the caller has it (predict.KernelSums)."""
    device = sum(k.time_s for k in kernels) if device_s is None else device_s
    path = kernel_path_seconds(kernels, settings, profile)
    roundtrip = (profile.launch.step_us * 1e-6 / steps_per_round(settings, epoch_steps)
                 + handover_seconds(samples_per_step, settings, profile, host) + nonsink_loop_seconds(settings, profile))
    transfer = 0.0 if settings.sink else host.bytes_per_sample * samples_per_step / (profile.host.link_gbps * 1e9)
    overlapped = settings.prefetch > 0 and not profile.host.shares_device
    return HostTime(kernel_path_s=path, device_s=device, roundtrip_s=roundtrip, transfer_s=transfer,
                    data_s=data_seconds(samples_per_step, settings, profile, host), data_overlapped=overlapped,
                    recompile_s=recompile_seconds(settings, modes_of(host), graph_ops, epoch_steps, profile))
