"""Device time of each kernel: a roofline with shape-dependent efficiencies (Paleo/Calculon style).

A kernel's time is max(FLOPs / (unit rate x efficiency), bytes / (bandwidth x efficiency)).
Matrix ops run on the Cube at the rate of the dtype they really use (the chip's precision rule:
on 910A an fp32 matmul runs in fp16; on the 910B an fp32 Conv runs as HF32 by CANN's default while an
fp32 MatMul stays fp32, `cube_dtype`); everything else runs on the Vector unit. A profile with
`[kernel_classes]` (the Ascend ones, derived from per-op profiles by hardware.calibration.derive)
costs each kernel by its class (hardware.model.opclass): Cube classes by the work per core in
16x16x16 tiles, Vector classes by the bytes they move, plus a fixed device cost per kernel (the
latency + bandwidth form: a tiny kernel costs its start-up, a large one its roofline) and a
slowdown for Vector kernels whose innermost dimension is not whole 32-byte blocks; a profile
without (the fitted `cpu` one) uses one Cube table by K and one memory table. A CPU profile whose
classes carry `op_costs` (cpu-icelake: lines fitted per op type on its own per-op profiles) costs a lone
op of such a type by its line instead, fixed + per-MB + per-GFLOP time added up. Ops sharing a
`fusion_group` become one kernel: their FLOPs add up, the tensors passed between them never
touch memory, and they cost one launch. Ascend's fused attention kernels (FlashAttentionScore and its
gradient) are costed by the chip's measured flash tables at the tile-equivalents of their FLOPs per
core (`flash_efficiency`); their score tiles stay on chip, so they move only Q, K, V, O, the softmax
statistics and the gradients. On a chip whose compiler folds dtype conversion into the
neighbouring kernels (`precision.fuses_casts`, Ascend), the lowering pass (lowering.py) has already
removed the Casts it folds; the Casts left are kernels.
"""

from __future__ import annotations

import functools
import math
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from hardware.model.opclass import CUBE_CLASSES, FLASH_CLASSES, gemm_class, op_class
from hardware.model.opgraph import DTYPE_BYTES, Op
from hardware.model.profile import EfficiencyTable, HardwareProfile

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
    kernel_class: str = ""     # hardware.model.opclass class whose efficiency costed it
    floor_s: float = 0.0       # fixed device cost of any kernel (start, tail), before its roofline time
    overlapped: bool = True    # compute and traffic overlap (a roofline); False: a fitted op line adds them

    @functools.cached_property
    def time_s(self) -> float:
        """Computed once per kernel (a costed kernel is shared by every cell and end that reads it)."""
        busy = max(self.compute_s, self.memory_s) if self.overlapped else self.compute_s + self.memory_s
        return self.floor_s + busy

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
    if dtype == "hf32":
        return profile.cube.tflops_hf32
    return {"fp16": profile.cube.tflops_fp16, "bf16": profile.cube.tflops_bf16,
            "fp32": profile.cube.tflops_fp32}[matrix_dtype(dtype, profile)]


CONV_CLASSES = ("conv_forward", "conv_input_grad", "conv_filter_grad")


def cube_dtype(op: Op, profile: HardwareProfile) -> str:
    """The dtype a Cube op really runs at: `matrix_dtype`, except that an fp32 convolution runs as HF32 on
    a chip whose CANN default converts Conv-class fp32 to HF32 (`precision.hf32_convs`; MatMul-class ops
    are not converted by default, so they keep the fp32 rate)."""
    dtype = matrix_dtype(compute_dtype(op), profile)
    if (dtype == "fp32" and profile.precision.hf32_convs and profile.cube.tflops_hf32 > 0
            and op_class(op.type, "cube") in CONV_CLASSES):
        return "hf32"
    return dtype


def vector_tflops(dtype: str, profile: HardwareProfile) -> float:
    return profile.vector.tflops_fp32 if dtype == "fp32" else profile.vector.tflops_fp16


def stride_area(op: Op) -> float:
    """How many input pixels each output-gradient pixel stands for: (H·W)/(Ho·Wo), 4 for stride 2.
    The Cube computes an input gradient as a stride-1 convolution of the dilated output gradient, so
    it runs this many times the useful FLOPs. The output gradient is the input with the output's
    batch and the largest spatial size (a weight's kh·kw is smaller)."""
    out = op.outputs[0].shape if op.outputs else ()
    if len(out) < 4:
        return 1.0
    grads = [t.shape for t in op.inputs if len(t.shape) == len(out) and t.shape[0] == out[0]]
    if not grads:
        return 1.0
    dy = max(grads, key=lambda s: s[2] * s[3])
    return max(1.0, (out[2] * out[3]) / max(dy[2] * dy[3], 1))


def gemm_shape(op: Op) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of the GEMMs the Cube runs for a matrix op, from its output shape and FLOPs.

    N is the output's channel axis: axis 1 of a conv or input-gradient output (NCHW), axis 0 of a
    filter gradient (Cout, Cin, kh, kw; M = Cin·kh·kw, K = the batch·pixels it sums over), the last
    axis of a matmul (a BatchMatMul's leading axes are its batch). K = FLOPs / (2·batch·M·N), times
    the stride area for an input gradient (see stride_area)."""
    if not op.outputs:
        return (1, 1, 1, 1)
    out = tuple(max(int(d), 1) for d in (op.outputs[0].shape or (1,)))
    kind = op_class(op.type, op.unit)
    batch = 1
    if kind == "conv_filter_grad" and len(out) >= 2:
        n = out[0]
    elif kind in ("conv_forward", "conv_input_grad") and len(out) >= 2:
        n = out[1]
    else:
        n = out[-1]
        if kind == "batch_matmul" and len(out) >= 3:
            batch = math.prod(out[:-2])
    m = max(math.prod(out) // (n * batch), 1)
    k = op.flops / (2 * batch * m * n)
    if kind == "conv_input_grad":
        k *= stride_area(op)
    return (batch, m, n, max(round(k), 1))


def gemm_dims(op: Op) -> tuple[int, int, int]:
    """(M, N, K) of one GEMM of the op (see gemm_shape)."""
    return gemm_shape(op)[1:]


def tiles_per_core(batch: int, m: int, n: int, k: int, tile: int, cores: int) -> float:
    """The Cube work each core gets: tile-padded GEMM blocks over the cores (an ideal split)."""
    tile = max(tile, 1)
    return batch * math.ceil(m / tile) * math.ceil(n / tile) * math.ceil(k / tile) / max(cores, 1)


def padded_flops(batch: int, m: int, n: int, k: int, tile: int) -> int:
    """The FLOPs the Cube runs for these GEMMs once M, N, K are padded up to its tile."""
    tile = max(tile, 1)
    return 2 * batch * math.prod(math.ceil(d / tile) * tile for d in (m, n, k))


def flops_work(flops: float, profile: HardwareProfile) -> float:
    """FLOPs as the Cube tiles per core they fill: flops / (2·tile³·cores), the index of the Cube tables
    for a kernel whose GEMMs are many small on-chip tiles (fused attention) rather than one GEMM."""
    tile = max(profile.cube.tile, 1)
    return flops / (2 * tile**3 * max(profile.cube.cores, 1))


def has_flash_kernel(profile: HardwareProfile) -> bool:
    """Whether the profile can cost Ascend's fused attention (it has measured flash tables)."""
    classes = profile.kernel_classes
    return classes is not None and classes.flash_attention is not None and classes.flash_attention_grad is not None


def flash_efficiency(op: Op, profile: HardwareProfile) -> float:
    """A fused attention kernel's FLOPs over peak: the chip's flash table at its work per core."""
    kind = op_class(op.type, op.unit)
    if not has_flash_kernel(profile):
        raise ValueError(f"{op.type} on {profile.name}: the profile has no {kind} table (the capability table "
                         "refuses flash_attention there)")
    return profile.kernel_classes.table(kind).at(flops_work(op.flops, profile))   # type: ignore[union-attr]


def cube_efficiency(op: Op, profile: HardwareProfile) -> float:
    """Useful FLOPs over peak: the table's efficiency of the padded work (per class at the work per
    core where the profile has classes, else by the reduction length K: a short K cannot amortise
    writing each output tile back) times the useful share of the work the Cube runs."""
    if op_class(op.type, op.unit) in FLASH_CLASSES:
        return flash_efficiency(op, profile)
    batch, m, n, k = gemm_shape(op)
    tile = max(profile.cube.tile, 1)
    useful = min(1.0, op.flops / padded_flops(batch, m, n, k, tile)) if op.flops > 0 else 1.0
    classes = profile.kernel_classes
    if classes is not None:
        return classes.table(cube_class(op)).at(tiles_per_core(batch, m, n, k, tile, profile.cube.cores)) * useful
    return typing.cast(EfficiencyTable, profile.cube.efficiency).at(k) * useful


def cube_class(op: Op) -> str:
    """The class of a Cube op: by its type, refined by its GEMM (opclass.gemm_class)."""
    kind = op_class(op.type, "cube")
    if kind in FLASH_CLASSES:
        return kind
    _, m, n, k = gemm_shape(op)
    return gemm_class(kind, m, n, k)


# The kernel classes whose traffic the `memory` table prices (every other class streams at its own table).
MEMORY_TABLE_CLASSES = frozenset((*CUBE_CLASSES, *FLASH_CLASSES))


def traffic_table(kernel_class: str, profile: HardwareProfile) -> EfficiencyTable:
    """The bandwidth efficiency a kernel of this class streams at: its own table for a Vector class,
    the `memory` table for a Cube kernel's operands; the one memory table without classes."""
    classes = profile.kernel_classes
    if classes is None:
        return typing.cast(EfficiencyTable, profile.memory.efficiency)
    return classes.memory if kernel_class in MEMORY_TABLE_CLASSES else classes.table(kernel_class)


def memory_seconds(nbytes: int, profile: HardwareProfile, kernel_class: str = "elementwise") -> float:
    """Bytes over the achieved bandwidth; a working set that fits in L2 streams at L2 speed."""
    if nbytes <= 0:
        return 0.0
    return nbytes / (stream_gbps(nbytes, profile) * 1e9 * traffic_table(kernel_class, profile).at(nbytes))


def stream_gbps(nbytes: int, profile: HardwareProfile) -> float:
    """The peak a kernel moving `nbytes` streams at: L2's where its working set fits there, else memory's."""
    mem = profile.memory
    return mem.l2_gbps if nbytes <= mem.l2_mib * 2**20 else mem.gbps


BLOCK_BYTES = 32        # DaVinci data moves in 32-byte blocks (MTE transfers, Unified Buffer alignment)


def innermost_aligned(op: Op) -> bool:
    """Whether the op's largest tensor has an innermost dimension of whole 32-byte blocks. A 4-D
    activation counts as aligned: Ascend keeps it as NC1HWC0, whose innermost C0 = 16 is a block."""
    tensors = (*op.inputs, *op.outputs)
    if not tensors:
        return True
    big = max(tensors, key=lambda t: t.nbytes)
    if len(big.shape) == 4 or not big.shape:
        return True
    return (big.shape[-1] * DTYPE_BYTES.get(big.dtype, 4)) % BLOCK_BYTES == 0


def unaligned_factor(group: Sequence[Op], kernel_class: str, profile: HardwareProfile) -> float:
    classes = profile.kernel_classes
    if classes is None or all(innermost_aligned(op) for op in group):
        return 1.0
    return classes.unaligned(kernel_class)


def floor_seconds(profile: HardwareProfile) -> float:
    classes = profile.kernel_classes
    return classes.min_kernel_us * 1e-6 if classes is not None else 0.0


def group_class(group: Sequence[Op]) -> str:
    """A fused kernel's class: that of its Cube member, else of its first member."""
    cube = [op for op in group if op.unit == "cube"]
    return cube_class(cube[0]) if cube else op_class(group[0].type, group[0].unit)


def compute_seconds(op: Op, profile: HardwareProfile) -> float:
    if op.flops <= 0:
        return 0.0
    dtype = compute_dtype(op)
    if op.unit == "cube":
        return op.flops / (matrix_tflops(cube_dtype(op, profile), profile) * 1e12 * cube_efficiency(op, profile))
    return op.flops / (vector_tflops(dtype, profile) * 1e12
                       * profile.vector.efficiency.at(vector_work_elements((*op.inputs, *op.outputs))))


def vector_work_elements(tensors: Sequence[Any]) -> int:
    """The elements a Vector kernel's cores share, which sets its occupancy: its largest tensor. A
    reduction (BNTrainingReduce, BNTrainingUpdateGrad) writes per-channel vectors but streams a whole
    activation, so its output alone would read as a nearly idle chip."""
    return max((t.elements for t in tensors), default=1)


def op_bytes(op: Op, profile: HardwareProfile) -> int:
    """Bytes the op moves. On a chip that runs fp32 matrix ops in fp16, the Cube reads fp16 operands."""
    if op.unit == "cube" and compute_dtype(op) == "fp32" and matrix_dtype("fp32", profile) == "fp16":
        return op.bytes // 2
    return op.bytes


def intermediate_bytes(group: Sequence[Op]) -> int:
    """Traffic a fused chain saves: every member's output except the last is written once and
    read once by the next member, and neither happens when they stay on chip."""
    return 2 * sum(sum(o.nbytes for o in op.outputs) for op in group[:-1])


def cost_work(gemm: tuple[int, int, int, int] | None, output_elements: int) -> int:
    """The FLOPs an op line (profile.OpCost) is indexed by: the GEMM the kernel runs (an input gradient's
    at its dilated K, see gemm_shape), or one per output element for a Vector op. One definition for the
    fit (hardware.calibration.table.Row.flops) and the model (op_line_kernel)."""
    return 2 * math.prod(gemm) if gemm is not None else output_elements


def op_line_kernel(op: Op, profile: HardwareProfile) -> Kernel | None:
    """A lone op costed by its own type's fitted line (a CPU profile's `op_costs`), None without one."""
    classes = profile.kernel_classes
    line = classes.op_cost(op.type, compute_dtype(op)) if classes is not None else None
    if line is None:
        return None
    gemm = gemm_shape(op) if op.unit == "cube" else None
    work = cost_work(gemm, math.prod(op.outputs[0].shape) if op.outputs else 0)
    return Kernel(ops=(op,), phase=op.phase, unit=op.unit, flops=op.flops, bytes=op.bytes,
                  compute_s=line.us_per_gflop * work * 1e-15, memory_s=line.us_per_mb * op.bytes * 1e-12,
                  kernel_class=group_class([op]), floor_s=line.fixed_us * 1e-6, overlapped=False)


def make_kernel(group: Sequence[Op], profile: HardwareProfile) -> Kernel:
    if len(group) == 1:
        line = op_line_kernel(group[0], profile)
        if line is not None:
            return line
    flops = sum(op.flops for op in group)
    total = sum(op_bytes(op, profile) for op in group)
    floor = max(op_bytes(op, profile) for op in group)      # a kernel moves at least its largest member
    nbytes = max(total - intermediate_bytes(group), floor) if len(group) > 1 else total
    unit = "cube" if any(op.unit == "cube" for op in group) else "vector"
    kind = group_class(group)
    return Kernel(ops=tuple(group), phase=group[0].phase, unit=unit, flops=flops, bytes=nbytes,
                  compute_s=sum(compute_seconds(op, profile) for op in group),
                  memory_s=memory_seconds(nbytes, profile, kind) * unaligned_factor(group, kind, profile),
                  kernel_class=kind,
                  floor_s=floor_seconds(profile))


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


KERNEL_MEMO_LIMIT = 200_000      # costed kernels kept per profile (a few hundred MB at most)


@functools.lru_cache(maxsize=32)
def costed_kernels(profile: HardwareProfile) -> dict[tuple[Op, ...], Kernel]:
    """The kernels already costed on this profile, by their member ops. Costing is pure, and a matrix
    predicts the same graphs under many settings, so most of a warm cell's kernels were costed before.
    32 profiles: each chip's own and the ends of its device-side estimates (estimate_ends), so the cells
    that share a graph (every host-side variant of a recipe) share its ends' kernels too; with 4, the
    nightly's 108 predictions took 92 s, with 32, 63 s (and 770 MB, +70 MB)."""
    return {}


def kernel_memo(profile: HardwareProfile) -> dict[tuple[Op, ...], Kernel]:
    """The profile's costed kernels (`costed_kernels`), emptied when it has grown past KERNEL_MEMO_LIMIT."""
    memo = costed_kernels(profile)
    if len(memo) > KERNEL_MEMO_LIMIT:
        memo.clear()
    return memo


def memo_kernel(group: Sequence[Op], profile: HardwareProfile, memo: dict[tuple[Op, ...], Kernel]) -> Kernel:
    """The group's kernel on `profile`, from `memo` (the profile's `kernel_memo`) or costed into it."""
    key = tuple(group)
    kernel = memo.get(key)
    if kernel is None:
        kernel = memo[key] = make_kernel(group, profile)
    return kernel


def kernels(ops: Iterable[Op], profile: HardwareProfile) -> list[Kernel]:
    """One Kernel per launched kernel (the ops are the device's: `lowering.lower` for an NPU)."""
    memo = kernel_memo(profile)
    return [memo_kernel(group, profile, memo) for group in group_ops(ops)]
