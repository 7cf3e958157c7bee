"""Which `estimate` constants of a profile a prediction depends on.

A profile labels constants without a direct measurement (`[estimates]`, see profile.py). A
prediction lists those it actually read, so a report can re-predict at each end of their ranges
and tell a robust verdict from one that hangs on a guess. "Read" is decided from the mechanisms:
only the dispatch constant the settings select, only the kernel classes the step has, the
collective constants only with more than one device, the tips' constants (`tips.*`) only with
the knobs that use them.
"""

from __future__ import annotations

from typing import Iterable

from hardware.model.comm import level_groups
from hardware.model.compute import Kernel, cube_dtype
from hardware.model.compile_mode import compile_mode
from hardware.model.host_time import pipeline_workers
from hardware.model.opclass import CUBE_CLASSES, FLASH_CLASSES, VECTOR_CLASSES
from hardware.model.pipeline_modes import tip_estimates_unread
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

LAUNCH_DISPATCH = ("launch.pynative_us", "launch.graph_o0_us", "launch.graph_o1_us", "launch.graph_o2_us")


def unused_keys(kernels: Iterable[Kernel], settings: Settings, profile: HardwareProfile,
                data_s: float = 1.0, transfer_s: float = 1.0) -> set[str]:
    """Dotted keys (or key prefixes ending in '.') the prediction for these settings never reads;
    `data_s`/`transfer_s` are the host pipeline and batch-copy times (0: their constants unread)."""
    ks = list(kernels)
    unused = set(LAUNCH_DISPATCH) - {f"launch.{compile_mode(settings, profile).dispatch_key}"}
    classes = {k.kernel_class for k in ks}
    unused |= {f"kernel_classes.{c}" for c in (*CUBE_CLASSES, *VECTOR_CLASSES, *FLASH_CLASSES)
               if c not in classes}
    if not any(k.unit == "cube" for k in ks):
        unused.add("kernel_classes.memory")
    if not any(cube_dtype(op, profile) == "hf32" for k in ks for op in k.ops if op.unit == "cube"):
        unused.add("cube.tflops_hf32")          # read only by fp32 convolutions on an hf32_convs chip
    if settings.devices <= 1:
        unused.add("comm.")
    else:
        used_levels = {lv.name for lv, _ in level_groups(settings.devices, profile.comm.levels)}
        unused |= {f"comm.levels.{lv.name}." for lv in profile.comm.levels if lv.name not in used_levels}
    if settings.sink or profile.host.shares_device:
        unused.add("launch.nonsink_us")        # priced only on a non-sink step of a separate device
    if settings.sink or transfer_s <= 0:
        unused.add("host.link_gbps")           # no copy, or the device queue prefetches it under sink
    if data_s <= 0:
        unused |= {"host.core_speed", "host.cores_per_device"}
    return unused | tip_estimates_unread(settings, profile, pipeline_workers(settings, profile))


def estimates_used(kernels: Iterable[Kernel], settings: Settings, profile: HardwareProfile,
                   data_s: float = 1.0, transfer_s: float = 1.0) -> list[dict]:
    """The estimate constants behind a prediction: key, range and reason, sorted by key."""
    unused = unused_keys(kernels, settings, profile, data_s, transfer_s)

    def read(key: str) -> bool:
        return key not in unused and not any(u.endswith(".") and key.startswith(u) for u in unused)

    return [{"key": e.key, "range": [e.low, e.high], "reason": e.reason}
            for e in profile.estimates if read(e.key)]
