"""Knobs -> MindSpore 2.10 API calls, per device; and the knobs a device cannot honour.

`unsupported_reason` and `plan_context` are pure (no MindSpore import) so the runner's parent
process can refuse a cell before starting a child, and so the Ascend/GPU configuration is unit-
tested here on a CPU host. `apply_context` and `apply_jit` are the only places that touch
MindSpore's global context. Facts cited are from shared/reference/mindspore-2.10-cpu.md.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from hardware.capabilities import Facts, refusal
from msbench.child_io import ISA_DEFAULT, ISA_ENV
from msbench.settings import DEFAULTS, Settings

MS_DEVICE = {"cpu": "CPU", "ascend": "Ascend", "gpu": "GPU"}
DEVICE_NODES = {"ascend": "/dev/davinci[0-9]*", "gpu": "/dev/nvidia[0-9]*"}
_op_threads: int | None = None


@dataclass(frozen=True)
class ContextPlan:
    """Everything `apply_context` will set, as data: `device` for `ms.set_device`, `mode` for
    `ms.set_context(mode=...)`, `jit_level` for `cell.set_jit_config(ms.JitConfig(jit_level=...))`
    (None = leave MindSpore's default), `graph_kernel` for `ms.set_context(enable_graph_kernel=True)`,
    `threads` for the CPU op thread pool, `env` set before the first kernel runs, the dataset-sink
    plan (`ms.data_sink(step, dataset, sink_size=...)`, Ascend/GPU only), and the memory pool's
    `ms.runtime.set_memory(optimize_level=..., max_size=...)` (None = MindSpore's default)."""

    device: str
    mode: str                       # "GRAPH_MODE" | "PYNATIVE_MODE"
    jit_level: str | None
    graph_kernel: bool
    threads: int | None
    sink: bool
    sink_size: int
    device_memory_counters: bool    # ms.runtime.max_memory_allocated is meaningful (not 0 as on the CPU)
    env: dict[str, str] = field(default_factory=dict)
    memory_optimize_level: str | None = None     # set_memory(optimize_level=...); None = leave the default
    max_memory: str | None = None                # set_memory(max_size="<GiB>GB"); None = the device's usable memory


def host_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def host_has_avx512(cpuinfo: str | None = None) -> bool:
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    return any(line.startswith("flags") and " avx512f" in line for line in cpuinfo.splitlines())


def isa_env(cpuinfo: str | None = None) -> dict[str, str]:
    """`ONEDNN_MAX_CPU_ISA=AVX2` on AVX-512 hosts: there oneDNN 3.10 picks a reference NCHW conv
    (30-100x slower) for MindSpore's plain layouts. A value the user already set is kept."""
    if ISA_ENV in os.environ:
        return {ISA_ENV: os.environ[ISA_ENV]}
    return {ISA_ENV: ISA_DEFAULT} if host_has_avx512(cpuinfo) else {}


def device_present(device: str) -> bool:
    return device == "cpu" or bool(glob.glob(DEVICE_NODES[device]))


def unsupported_reason(settings: Settings, device: str, cpus: int | None = None,
                       device_check: bool = True) -> str | None:
    """Why `device` cannot honour these settings (None when it can): the device's presence, then the
    capability table's refusals for `mindspore:<device>`. Nothing is measured as if applied."""
    if device_check and not device_present(device):
        return f"device={device}: no {MS_DEVICE[device]} device on this host ({DEVICE_NODES[device]} absent)"
    return refusal(settings, f"mindspore:{device}", Facts(cpus=host_cpus() if cpus is None else cpus))


def plan_context(settings: Settings, device: str, threads: int | None = None) -> ContextPlan:
    """The MindSpore configuration for a cell on a device (pure; see ContextPlan)."""
    on_cpu = device == "cpu"
    return ContextPlan(
        device=MS_DEVICE[device],
        mode="GRAPH_MODE" if settings.mode == "graph" else "PYNATIVE_MODE",
        # On the CPU only O0 reaches here; elsewhere the level is set explicitly so it is on record.
        jit_level=None if on_cpu else (settings.jit_level if settings.mode == "graph" else None),
        graph_kernel=settings.graph_kernel,
        # data-parallel ranks share the host: each gets its slice of the CPUs
        threads=(threads or max(1, host_cpus() // settings.devices)) if on_cpu else None,
        sink=settings.sink,
        sink_size=settings.sink_size,
        device_memory_counters=not on_cpu,
        env=isa_env() if on_cpu else {},
        memory_optimize_level=(settings.memory_optimize_level
                               if settings.memory_optimize_level != DEFAULTS["memory_optimize_level"] else None),
        max_memory=None if settings.max_device_memory is None else f"{settings.max_device_memory:g}GB",
    )


def apply_context(plan: ContextPlan) -> None:
    """Set MindSpore's global context for this (isolated) process."""
    os.environ.update(plan.env)
    import mindspore as ms

    ms.set_device(plan.device)
    ms.set_context(mode=getattr(ms, plan.mode))
    if plan.graph_kernel:
        ms.set_context(enable_graph_kernel=True)   # deprecated spelling, but jit O1 does not fuse on CPU
    memory = {k: v for k, v in (("optimize_level", plan.memory_optimize_level), ("max_size", plan.max_memory)) if v}
    if memory:
        ms.runtime.set_memory(**memory)
    global _op_threads
    if plan.threads and _op_threads is None:
        ms.device_context.cpu.op_tuning.threads_num(plan.threads)   # settable once per process
        _op_threads = plan.threads


def op_threads() -> int | None:
    """The CPU op thread count this process fixed (the first session's: MindSpore allows one setting)."""
    return _op_threads


def apply_jit(cell: object, plan: ContextPlan) -> None:
    """Per-cell jit level (the 2.10 replacement of `set_context(jit_config=...)`)."""
    if plan.jit_level is None:
        return
    import mindspore as ms

    cell.set_jit_config(ms.JitConfig(jit_level=plan.jit_level))  # type: ignore[attr-defined]
