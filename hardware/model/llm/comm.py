"""The collectives of a tp × dp × pp layout over the profile's topology.

Ranks are laid out tensor-parallel fastest, then data-parallel, then pipeline stage (MindSpore gives
stage i the i-th contiguous block of devices/pp ranks; Megatron-LM's order is the same). A group of
`size` ranks `stride` apart therefore has min(size, server/stride) members in each server (the
profile's first level, the 8-card HCCS mesh of a 910B server) and spans the rest over the next level
(RoCE): its collectives run on `hardware.model.comm.allreduce_seconds` over those two levels, so the
α-β formulas and their cited constants stay in one place. A reduce-scatter or an all-gather moves
half an all-reduce's bytes in half its steps (Thakur et al. 2005): half its time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from hardware.model.comm import allreduce_seconds
from hardware.model.llm.shape import Parallel
from hardware.model.profile import HardwareProfile, Level


@dataclass(frozen=True)
class Group:
    """`size` ranks `stride` apart."""

    size: int
    stride: int


def tp_group(par: Parallel) -> Group:
    return Group(par.tp, 1)


def dp_group(par: Parallel) -> Group:
    return Group(par.dp, par.tp)


def group_levels(group: Group, profile: HardwareProfile) -> tuple[Level, ...]:
    """The levels a strided group runs over: the inner one with its members per server, then the rest."""
    inner, *outer = profile.comm.levels
    per_server = max(1, min(group.size, inner.size // group.stride)) if inner.size else group.size
    if per_server == 1:
        return tuple(outer) or (inner,)
    return (dataclasses.replace(inner, size=per_server), *outer)


def allreduce(nbytes: float, group: Group, profile: HardwareProfile) -> float:
    if group.size <= 1 or nbytes <= 0:
        return 0.0
    levels = group_levels(group, profile)
    placed = dataclasses.replace(profile, comm=dataclasses.replace(profile.comm, levels=levels))
    return allreduce_seconds(nbytes, group.size, placed)


def reduce_scatter(nbytes: float, group: Group, profile: HardwareProfile) -> float:
    return allreduce(nbytes, group, profile) / 2


all_gather = reduce_scatter


def stage_link(par: Parallel, profile: HardwareProfile) -> Level:
    """The link between adjacent pipeline stages: tp·dp ranks apart, inside a server only if that fits."""
    inner, *outer = profile.comm.levels
    return inner if par.tp * par.dp < max(inner.size, 1) or not outer else outer[0]


def send_seconds(nbytes: float, par: Parallel, profile: HardwareProfile) -> float:
    """One point-to-point send between adjacent stages (α + bytes/B)."""
    if par.pp <= 1 or nbytes <= 0:
        return 0.0
    link = stage_link(par, profile)
    return link.latency_us * 1e-6 + nbytes / (link.gbps * 1e9 * profile.comm.efficiency)


@dataclass(frozen=True)
class Overlapped:
    total_s: float
    exposed_s: float
    buckets: int


def bucketed(nbytes: float, group: Group, window_s: float, profile: HardwareProfile, factor: float = 1.0
             ) -> Overlapped:
    """Fused buckets of `profile.comm.bucket_mib` launched while `window_s` of compute runs: the step waits
    for what does not fit under it, and always for the last bucket. `factor` 0.5: reduce-scatter/all-gather."""
    if group.size <= 1 or nbytes <= 0:
        return Overlapped(0.0, 0.0, 0)
    bucket = profile.comm.bucket_mib * 2**20
    count = max(1, math.ceil(nbytes / bucket))
    last = nbytes - bucket * (count - 1)
    full_s = factor * allreduce(bucket, group, profile) if count > 1 else 0.0
    last_s = factor * allreduce(last, group, profile)
    total = full_s * (count - 1) + last_s
    return Overlapped(total, max(last_s, total - window_s), count)
