"""How MindSpore compiles a cell's step on a profile's chip: decided here once, read by fusion, lowering
and the host-time model (each used to derive its own piece from the raw settings)."""

from __future__ import annotations

from dataclasses import dataclass

from hardware.model.profile import HardwareProfile
from msbench.settings import Settings


@dataclass(frozen=True)
class CompileMode:
    graph_kernel_fusion: bool   # the extracted graph is fused as graph-kernel fusion would (fusion.py)
    buffer_fusion: bool         # jit O2 on an NPU: GE's buffer fusion and fused optimizer kernels (lowering.py)
    dispatch_key: str           # the `[launch]` constant that prices one kernel's dispatch (host_time.py)
    dispatch_hidden: bool       # an asynchronous host dispatches ahead of the device (slot = max, not sum)


def _dispatch_key(settings: Settings) -> str:
    if settings.mode == "pynative":
        return "pynative_us"
    if settings.jit_level == "O2":
        return "graph_o2_us"
    if settings.jit_level == "O1" or settings.graph_kernel:
        return "graph_o1_us"
    return "graph_o0_us"


def compile_mode(settings: Settings, profile: HardwareProfile) -> CompileMode:
    """Graph-kernel fusion happens with graph_kernel=true, or with jit O1 on Ascend (MindSpore's CPU backend
    accepts jit O1 without fusing: reference mindspore-2.10-cpu.md §1). Whole-graph O2 sinks every kernel as
    one task list, so its per-kernel cost is paid on the device and is never hidden behind a longer kernel."""
    graph = settings.mode == "graph"
    whole_graph = graph and settings.jit_level == "O2"
    return CompileMode(
        graph_kernel_fusion=graph and (settings.graph_kernel or (settings.jit_level == "O1"
                                                                 and profile.profile.kind == "npu")),
        buffer_fusion=whole_graph and profile.profile.kind == "npu",
        dispatch_key=_dispatch_key(settings),
        dispatch_hidden=profile.launch.asynchronous and not whole_graph)
