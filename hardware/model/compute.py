"""Device time of each kernel: a roofline with shape-dependent efficiencies (Paleo/Calculon style).

A kernel's time is max(FLOPs / (unit rate x efficiency), bytes / (bandwidth x efficiency)).
Matrix ops run on the Cube at the rate of the dtype they really use (the chip's precision rule:
on 910A an fp32 matmul runs in fp16); everything else runs on the Vector unit. Ops sharing a
`fusion_group` become one kernel: their FLOPs add up, the tensors passed between them never
touch memory, and they cost one launch. On a chip whose compiler folds dtype conversion into the
neighbouring kernels (`precision.fuses_casts`, Ascend), the lowering pass (lowering.py) has already
removed the Casts it folds; the Casts left are kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from hardware.model.opgraph import Op
from hardware.model.profile import HardwareProfile

FLOAT_DTYPES = ("Float16", "BFloat16", "Float32", "Float64")
DTYPE_KEY = {"Float16": "fp16", "BFloat16": "bf16", "Float32": "fp32", "Float64": "fp32"}


@dataclass(frozen=True)
class Kernel:
    """One launched kernel: a single op or a fused group of ops."""

    ops: tuple[Op, ...]
    phase: str
    unit: str                  # "cube" if any member runs on the Cube, else "vector"
    flops: int
    bytes: int
    compute_s: float
    memory_s: float

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def memory_bound(self) -> bool:
        return self.memory_s > self.compute_s


def compute_dtype(op: Op) -> str:
    """The dtype an op computes in: its first floating-point input (or output), as fp16|bf16|fp32."""
    for spec in (*op.inputs, *op.outputs):
        if spec.dtype in FLOAT_DTYPES:
            return DTYPE_KEY[spec.dtype]
    return "fp32"


def matrix_dtype(dtype: str, profile: HardwareProfile) -> str:
    """What the Cube really runs: fp32 becomes fp16 where the chip has no fp32 path or MindSpore's
    default precision mode casts it (910A: allow_fp32_to_fp16); bf16 falls back to fp16 if absent."""
    cube = profile.cube
    if dtype == "fp32" and (profile.precision.matrix_fp32_as == "fp16" or cube.tflops_fp32 == 0):
        return "fp16"
    if dtype == "bf16" and cube.tflops_bf16 == 0:
        return "fp16"
    return dtype


def matrix_tflops(dtype: str, profile: HardwareProfile) -> float:
    return {"fp16": profile.cube.tflops_fp16, "bf16": profile.cube.tflops_bf16,
            "fp32": profile.cube.tflops_fp32}[matrix_dtype(dtype, profile)]


def vector_tflops(dtype: str, profile: HardwareProfile) -> float:
    return profile.vector.tflops_fp32 if dtype == "fp32" else profile.vector.tflops_fp16


def gemm_dims(op: Op) -> tuple[int, int, int]:
    """(M, N, K) of the GEMM a matrix op amounts to, from its output shape and FLOPs.

    N is the output's channel axis (axis 1 of an NCHW conv output, the last axis of a matmul),
    M the remaining output elements, K = FLOPs / (2 M N): the reduction length."""
    if not op.outputs:
        return (1, 1, 1)
    out = op.outputs[0].shape or (1,)
    conv_like = op.type.startswith("Conv") or op.type.startswith("DepthwiseConv")
    n = out[1] if conv_like and len(out) >= 2 else out[-1]
    n = max(int(n), 1)
    elements = max(math.prod(out), 1)
    m = max(elements // n, 1)
    k = max(round(op.flops / (2 * elements)), 1)
    return (m, n, k)


def cube_efficiency(op: Op, profile: HardwareProfile) -> float:
    """Efficiency from the table at the reduction length K (a short K cannot amortise writing each
    output tile back), times the useful fraction of the work once M, N, K are padded to the tile."""
    m, n, k = gemm_dims(op)
    tile = max(profile.cube.tile, 1)
    padded = math.prod(math.ceil(d / tile) * tile for d in (m, n, k))
    return profile.cube.efficiency.at(k) * (m * n * k) / padded


def memory_seconds(nbytes: int, profile: HardwareProfile) -> float:
    """Bytes over the achieved bandwidth; a working set that fits in L2 streams at L2 speed."""
    if nbytes <= 0:
        return 0.0
    mem = profile.memory
    fits_l2 = nbytes <= mem.l2_mib * 2**20
    gbps = mem.l2_gbps if fits_l2 else mem.gbps
    return nbytes / (gbps * 1e9 * mem.efficiency.at(nbytes))


def compute_seconds(op: Op, profile: HardwareProfile) -> float:
    if op.flops <= 0:
        return 0.0
    dtype = compute_dtype(op)
    if op.unit == "cube":
        return op.flops / (matrix_tflops(dtype, profile) * 1e12 * cube_efficiency(op, profile))
    elements = op.outputs[0].elements if op.outputs else 1
    return op.flops / (vector_tflops(dtype, profile) * 1e12 * profile.vector.efficiency.at(elements))


def op_bytes(op: Op, profile: HardwareProfile) -> int:
    """Bytes the op moves. On a chip that runs fp32 matrix ops in fp16, the Cube reads fp16 operands."""
    if op.unit == "cube" and compute_dtype(op) == "fp32" and matrix_dtype("fp32", profile) == "fp16":
        return op.bytes // 2
    return op.bytes


def intermediate_bytes(group: Sequence[Op]) -> int:
    """Traffic a fused chain saves: every member's output except the last is written once and
    read once by the next member, and neither happens when they stay on chip."""
    return 2 * sum(sum(o.nbytes for o in op.outputs) for op in group[:-1])


def make_kernel(group: Sequence[Op], profile: HardwareProfile) -> Kernel:
    flops = sum(op.flops for op in group)
    total = sum(op_bytes(op, profile) for op in group)
    floor = max(op_bytes(op, profile) for op in group)      # a kernel moves at least its largest member
    nbytes = max(total - intermediate_bytes(group), floor) if len(group) > 1 else total
    unit = "cube" if any(op.unit == "cube" for op in group) else "vector"
    return Kernel(ops=tuple(group), phase=group[0].phase, unit=unit, flops=flops, bytes=nbytes,
                  compute_s=sum(compute_seconds(op, profile) for op in group),
                  memory_s=memory_seconds(nbytes, profile))


def group_ops(ops: Iterable[Op]) -> list[list[Op]]:
    """Ops sharing a `fusion_group` form one kernel (placed where its first member was); every
    other op is a kernel of its own."""
    groups: list[list[Op]] = []
    by_id: dict[int, list[Op]] = {}
    for op in ops:
        if op.fusion_group is None:
            groups.append([op])
        elif op.fusion_group in by_id:
            by_id[op.fusion_group].append(op)
        else:
            by_id[op.fusion_group] = [op]
            groups.append(by_id[op.fusion_group])
    return groups


def kernels(ops: Iterable[Op], profile: HardwareProfile) -> list[Kernel]:
    """One Kernel per launched kernel (the ops are the device's: `lowering.lower` for an NPU)."""
    return [make_kernel(group, profile) for group in group_ops(ops)]
