"""Data-parallel gradient all-reduce over the profile's interconnect (α–β model).

Ring all-reduce of S bytes on p devices: T = 2(p-1)·α + 2·(p-1)/p · S/B (Thakur et al. 2005;
as used by Paleo and Calculon). On a full mesh every device talks to the other p-1 at once, so the
bandwidth term divides by p-1 and the latency term is two steps. A multi-level topology (910A: two
HCCS groups of four joined over PCIe; servers joined by RoCE) runs hierarchically: reduce-scatter
inside a group, all-reduce of the 1/p shard at the next level, all-gather back.

MindSpore fuses gradients into buckets that all-reduce while backward is still running, so only
what does not fit under backward is exposed; the last bucket is always exposed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hardware.model.profile import HardwareProfile, Level


@dataclass(frozen=True)
class CommTime:
    total_s: float             # all buckets back to back
    exposed_s: float           # what the step waits for after backward
    buckets: int
    bytes: int
    bucket_s: tuple[float, ...] = ()    # each bucket's all-reduce, in launch order


def level_groups(devices: int, levels: tuple[Level, ...]) -> list[tuple[Level, int]]:
    """How many devices take part at each level: inner levels fill first."""
    out, remaining = [], devices
    for level in levels:
        if remaining <= 1:
            break
        p = remaining if level.size == 0 else min(level.size, remaining)
        out.append((level, p))
        remaining = math.ceil(remaining / p)
    if remaining > 1:          # more devices than the topology describes: the last level stretches
        level, p = out[-1] if out else (levels[-1], 1)
        out[-1:] = [(level, p * remaining)]
    return out


def allreduce_seconds(nbytes: float, devices: int, profile: HardwareProfile) -> float:
    """One all-reduce of `nbytes` across `devices`, hierarchically over the topology's levels."""
    if devices <= 1 or nbytes <= 0:
        return 0.0
    total, shard = 0.0, float(nbytes)
    for level, p in level_groups(devices, profile.comm.levels):
        if p <= 1:
            continue
        gbps = level.gbps * 1e9 * profile.comm.efficiency
        alpha = level.latency_us * 1e-6
        if level.algorithm == "mesh":
            total += 2 * alpha + 2 * (p - 1) / p * shard / (gbps * (p - 1))
        else:
            total += 2 * (p - 1) * alpha + 2 * (p - 1) / p * shard / gbps
        shard /= p
    return total


def gradient_allreduce(grad_bytes: int, devices: int, backward_s: float, profile: HardwareProfile) -> CommTime:
    """Bucketed all-reduce overlapped with backward: exposed = max(last bucket, total - backward)."""
    if devices <= 1 or grad_bytes <= 0:
        return CommTime(0.0, 0.0, 0, grad_bytes)
    bucket = max(int(profile.comm.bucket_mib * 2**20), 1)
    full, rest = divmod(grad_bytes, bucket)
    sizes = [bucket] * full + ([rest] if rest else [])
    times = [allreduce_seconds(size, devices, profile) for size in sizes]
    total = sum(times)
    exposed = max(times[-1], total - backward_s)
    return CommTime(total_s=total, exposed_s=exposed, buckets=len(sizes), bytes=grad_bytes, bucket_s=tuple(times))
