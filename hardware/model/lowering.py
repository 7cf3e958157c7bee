"""Ascend lowering: the kernels Ascend's backend launches for a step that was extracted on the CPU backend.

The extracted op list is what MindSpore's CPU backend runs. Ascend's backend runs the same step as
other kernels, and their count, traffic and launches decide its time. The patterns below are read
off the public per-op profiles of MindSpore training on Ascend 910 (Huawei-Performance-Model/Ascend-910B,
application_test/final_test/{resnet50_32_224_224,bert_64_32}/; counts in
hardware/calibration/ascend_kernel_counts.toml):

- at every jit level (the kernel set Ascend has at all): BatchNorm splits into BNTrainingReduce +
  BNTrainingUpdate, BatchNormGrad into BNTrainingUpdateGrad + BNTrainingReduceGrad, LayerNormGrad into
  LayerNormXBackpropV2 + LayerNormBetaGammaBackpropV2. An NCHW ReLU is ReLUV2: it also writes a bitmask
  (one bit per element, channels padded to 16), and ReluGradV2 reads that mask instead of the output.
  Casts the compiler folds into neighbouring kernels disappear; the consumer reads (or the producer
  writes) the other width. The weight Casts of AMP, casts of graph inputs and casts between plain
  (ND) kernels stay.
- layouts: convolution, BN, ReLU and pooling run on NC1HWC0 (channels padded to 16), matrix ops on
  FRACTAL_NZ; a TransData converts a tensor where a kernel needs another layout than its producer
  wrote (conv weights live in FRACTAL_Z, so they need none; matmul weights are converted each step).
- AtomicAddrClean zeroes the output of a kernel whose cores accumulate into it: the BN statistics of
  Conv2D + BNTrainingReduce, a weight gradient, and BNTrainingUpdateGrad when its channel blocks are
  fewer than the cores (it then splits the batch).
- jit O2 (the graph sink the profiles ran; GE's buffer fusion) fuses beyond that: Conv2D +
  BNTrainingReduce; BNTrainingUpdate (+ Add) + ReLUV2; Conv2DBackpropInput (+ AddN) + ReluGradV2;
  BNTrainingReduceGrad + Conv2DBackpropFilter as FusedDbnDw where the profile shows it (1x1 convs at
  28x28 and more, any conv at 56x56 and more); MatMul + BiasAdd (+ GeLU/Tanh/ReLU); BatchMatMul +
  Mul + Add (FusedMulAdd); MatMul + GeLUGrad / AddN / the gradient-unscale Mul; Mul + ApplyMomentum
  as FusedMulApplyMomentum. At O0/O1 these stay separate kernels (O1's graph-kernel fusion is
  `fusion.py`'s, applied before this pass). MindSpore's docs: "O0: except for optimizations that may
  affect functionality, all other optimizations are turned off, KernelByKernel; O1: common optimizations
  and automatic operator fusion, KernelByKernel; O2: ultimate performance optimization, Sink"
  (mindspore.JitConfig). estimate: the O0/O1 kernel set is the TBE library's of these 910 profiles;
  MindSpore 2.x runs many kernel-by-kernel ops through ACLNN (on 910B), whose kernels no public profile
  here shows.
- primitives the CPU backend expands into basic ops (scope `Expand/_SoftmaxBackward`) are one Ascend
  kernel each; dropout is DropoutGenMask (AI CPU, not an AI Core kernel) + DropoutDoMask.
- update-step parts whose Ascend path is its own kernels, at every jit level (fused_optimizers.py):
  nn.Lamb's, and the loss scale's overflow check (the float-status register, no per-gradient test).

Fused kernels are ops sharing a `fusion_group` (compute.py makes a group one kernel); the kernel
type of a group is `FusionOp_<member types>`, the profiler's name. Data flow is matched on tensor
shape and dtype (OpGraph has no edges), over a short window of the execution order. Pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from hardware.model.ascend_layouts import add_atomic_cleans, add_layouts, layout_class
from hardware.model.ascend_ops import FP32, MATRIX_FAMILY, WINDOW, channels_of, make_op, mask_spec, spec_bytes, stats
from hardware.model.buffer_fusion import buffer_fusion
from hardware.model.compile_mode import compile_mode
from hardware.model.compute import group_ops
from hardware.model.fused_optimizers import float_status_check, fuse_lamb
from hardware.model.opgraph import Op, OpGraph, TensorSpec
from hardware.model.precision_casts import precision_casts
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

@dataclass(frozen=True)
class Lowering:
    """What the pass applies for one chip and jit level."""

    buffer_fusion: bool          # jit O2: GE's buffer fusion and the fused optimizer kernels
    cores: int                   # AI cores a kernel spreads over (decides the atomic-add split)
    fold_casts: bool             # the compiler folds dtype conversion into the neighbouring kernels
    precision_casts: bool        # fp32 Cube kernels run in fp16 between Casts (precision_casts.py)


def lowering_for(settings: Settings, profile: HardwareProfile) -> Lowering | None:
    """None where the profile's device is not an NPU: the CPU keeps the CPU backend's kernels."""
    if profile.profile.kind != "npu":
        return None
    return Lowering(buffer_fusion=compile_mode(settings, profile).buffer_fusion, cores=profile.cube.cores,
                    fold_casts=profile.precision.fuses_casts,
                    precision_casts=profile.precision.matrix_fp32_as == "fp16" or profile.cube.tflops_fp32 == 0)


# --------------------------------------------------------------------- 1. the kernels Ascend has
def split_batchnorm(op: Op) -> list[Op]:
    x, y = op.inputs[0], op.outputs[0]
    c = channels_of(op)
    reduce_flops = 2 * x.elements
    reduce = make_op("BNTrainingReduce", op, (x,), stats(c, 2), reduce_flops)
    update = make_op("BNTrainingUpdate", op, (x, *stats(c, 6)), (y, *stats(c, 4)),
                     max(op.flops - reduce_flops, x.elements))
    return [reduce, update]


def split_batchnorm_grad(op: Op) -> list[Op]:
    dy, x = op.inputs[0], op.inputs[1]
    dx = op.outputs[0]
    c = channels_of(op)
    update = make_op("BNTrainingUpdateGrad", op, (dy, x, *stats(c, 2)), stats(c, 2), 4 * x.elements)
    reduce = make_op("BNTrainingReduceGrad", op, (dy, x, *stats(c, 5)), (dx,), max(op.flops - 4 * x.elements,
                                                                                       4 * x.elements))
    return [update, reduce]


def split_layernorm_grad(op: Op) -> list[Op]:
    dy, x = op.inputs[0], op.inputs[1]
    d = x.shape[-1] if x.shape else 1
    rows = TensorSpec(FP32, (*x.shape[:-1], 1))
    dx = make_op("LayerNormXBackpropV2", op, (dy, x, rows, rows, TensorSpec(x.dtype, (d,))),
                 (op.outputs[0], x), max(op.flops * 2 // 3, 1))
    gamma = make_op("LayerNormBetaGammaBackpropV2", op, (dy, x), op.outputs[1:3] or stats(d, 2),
                    max(op.flops // 3, 1))
    return [dx, gamma]


def relu_v2(op: Op) -> list[Op]:
    x = op.inputs[0]
    return [make_op("ReLUV2", op, (x,), (op.outputs[0], mask_spec(x)), op.flops)]


def relu_grad_v2(op: Op) -> list[Op]:
    dy = op.inputs[0]
    return [make_op("ReluGradV2", op, (dy, mask_spec(dy)), op.outputs, op.flops)]


# Same work, Ascend's kernel name (dropout's mask generation runs on the AI CPU: no AI Core kernel).
RENAMES = {"MaxPool3DWithArgmax": "MaxPoolWithArgmax", "MaxPool3DGradWithArgmax": "MaxPoolGradWithArgmax",
           "Dropout": "DropoutDoMask", "DropoutGrad": "DropoutDoMask", "Transpose": "ConfusionTransposeD"}
# Primitives the CPU backend has no kernel for and expands into basic ops (scope "Expand/_<name>"); Ascend
# runs each as one kernel of its own.
EXPANDED = {"Expand/_SoftmaxBackward": "SoftmaxGrad", "Expand/_InplaceAddExt": "Add"}
# In-place primitives (`x += y`, as mindcv's ResNet writes its residual add) expand into `Mul(y, alpha)`,
# `Add(x, .)` and an `Assign` writing the sum back into x. Ascend's kernel (aclnnInplaceAdd) is the Add
# of x and y (alpha = 1 scales nothing) writing x itself: the scalar and the write-back are no work.
IN_PLACE = frozenset({"Expand/_InplaceAddExt"})


def collapse_expansions(ops: Sequence[Op]) -> list[Op]:
    """One Ascend kernel for each run of ops that the CPU backend expanded from one primitive."""
    out: list[Op] = []
    for op in ops:
        name = EXPANDED.get(op.scope)
        prev = out[-1] if out else None
        if op.type == "Assign" and prev is not None and prev.scope in IN_PLACE and op.fusion_group is None \
                and len(op.inputs) == 2 and op.inputs[1] in prev.outputs:
            continue                        # the in-place kernel's own write-back
        if name and prev is not None and prev.scope == op.scope and prev.fusion_group is None \
                and op.fusion_group is None and prev.phase == op.phase:
            ins = prev.inputs + tuple(t for t in op.inputs if t not in prev.outputs)
            flops = prev.flops + op.flops
            if op.scope in IN_PLACE:    # Add(x, Mul(y, alpha)) reads x and y (specs compare by value: pick by place)
                ins, flops = (op.inputs[0], *(t for t in prev.inputs if t.shape)), op.flops
            out[-1] = make_op(name, prev, ins, op.outputs, flops, nbytes=spec_bytes(ins + op.outputs))
        elif name and op.fusion_group is None:
            out.append(replace(op, type=name))
        else:
            out.append(op)
    return out


def ascend_kernels(op: Op) -> list[Op]:
    """The Ascend kernel(s) of one CPU kernel (ops inside a graph-kernel fusion group stay as they are)."""
    if op.fusion_group is not None:
        return [op]
    four_d = bool(op.inputs) and len(op.inputs[0].shape) == 4
    if op.type == "BatchNorm" and four_d:
        return split_batchnorm(op)
    if op.type == "BatchNormGrad" and four_d:
        return split_batchnorm_grad(op)
    if op.type == "LayerNormGrad" and len(op.inputs) >= 2:
        return split_layernorm_grad(op)
    if op.type == "ReLU" and four_d:
        return relu_v2(op)
    if op.type == "ReluGrad" and four_d:
        return relu_grad_v2(op)
    if op.type in RENAMES:
        return [replace(op, type=RENAMES[op.type])]
    return [op]


# ------------------------------------------------------------------------------ 2. folded casts
def retype(op: Op, old: TensorSpec, new: TensorSpec, side: str) -> Op:
    """`op` with tensor `old` read (side="inputs") or written ("outputs") as `new`; its bytes follow."""
    specs = getattr(op, side)
    if old not in specs:
        return op
    changed = tuple(new if t == old else t for t in specs)
    delta = spec_bytes(changed) - spec_bytes(specs)
    return replace(op, **{side: changed, "bytes": max(op.bytes + delta, 0)})


def weight_inputs(op: Op) -> tuple[TensorSpec, ...]:
    if op.type in MATRIX_FAMILY or op.type.startswith("Conv2D") or op.type == "BiasAdd":
        return op.inputs[1:]
    return ()


def kept_cast(ops: Sequence[Op], i: int) -> bool:
    """Casts Ascend runs as kernels: AMP's weight casts (read as a weight by a matrix op), casts of a graph
    input (nothing earlier wrote that tensor) and casts between two plain kernels (the loss)."""
    cast = ops[i]
    if not cast.inputs or not cast.outputs:
        return True
    src, dst = cast.inputs[0], cast.outputs[0]
    consumers = [op for op in ops[i + 1:i + 1 + WINDOW] if dst in op.inputs]
    if cast.phase == "forward" and any(dst in weight_inputs(op) for op in consumers):
        return True
    producer = next((op for op in reversed(ops[max(0, i - WINDOW):i]) if src in op.outputs), None)
    if producer is None and cast.phase == "forward":
        return True
    neighbours = ([producer] if producer else []) + consumers
    return bool(neighbours) and all(layout_class(op) == "ND" for op in neighbours)


def fold_casts(ops: list[Op]) -> list[Op]:
    """Drop the Casts the compiler folds: a down-cast is written narrow by its producer, an up-cast's
    readers read the narrow source instead."""
    out = list(ops)
    i = 0
    while i < len(out):
        cast = out[i]
        if cast.type != "Cast" or cast.fusion_group is not None or kept_cast(out, i):
            i += 1
            continue
        src, dst = cast.inputs[0], cast.outputs[0]
        if dst.nbytes < src.nbytes:
            for j in range(i - 1, max(-1, i - 1 - WINDOW), -1):
                if src in out[j].outputs:
                    out[j] = retype(out[j], src, dst, "outputs")
                    break
        else:
            for j in range(i + 1, min(len(out), i + 1 + WINDOW)):
                if dst in out[j].inputs:
                    out[j] = retype(out[j], dst, src, "inputs")
                if dst in out[j].outputs:          # written again: later readers read the new tensor
                    break
        del out[i]
    return out


# ----------------- 3. buffer fusion (jit O2): buffer_fusion.py; 4. layouts, 5. atomic cleans: ascend_layouts.py
# ------------------------------------------------------------------------------------ the pass
def lower_ops(ops: Sequence[Op], rules: Lowering) -> list[Op]:
    out = float_status_check(fuse_lamb([k for op in collapse_expansions(ops) for k in ascend_kernels(op)]))
    if rules.fold_casts:
        out = fold_casts(out)
    if rules.precision_casts:
        out = precision_casts(out)
    if rules.buffer_fusion:
        out = buffer_fusion(out)
    out = add_layouts(out)
    return add_atomic_cleans(out, rules.cores)


# The pass is a pure function of (ops, rules), and a warm process lowers one graph under many settings (a
# matrix's cells, the report's robustness pass): the result is kept per op tuple, by identity (the tuple is
# held with its result, so its id cannot be reused), for the most recent graphs.
_LOWERED: OrderedDict[tuple[int, Lowering], tuple[tuple[Op, ...], tuple[Op, ...]]] = OrderedDict()
LOWERED_KEPT = 64


def lowered_ops(ops: tuple[Op, ...], rules: Lowering) -> tuple[Op, ...]:
    key = (id(ops), rules)
    hit = _LOWERED.get(key)
    if hit is not None and hit[0] is ops:
        _LOWERED.move_to_end(key)
        return hit[1]
    out = tuple(lower_ops(ops, rules))
    _LOWERED[key] = (ops, out)
    if len(_LOWERED) > LOWERED_KEPT:
        _LOWERED.popitem(last=False)
    return out


def lower(graph: OpGraph, settings: Settings, profile: HardwareProfile) -> OpGraph:
    """The step as the profile's chip runs it; the graph unchanged where the chip is not an NPU."""
    rules = lowering_for(settings, profile)
    if rules is None or "lowering" in graph.meta:       # not an NPU, or lowered already
        return graph
    ops = lowered_ops(graph.ops, rules)
    meta = {**graph.meta, "lowering": {"chip": profile.name, "buffer_fusion": rules.buffer_fusion,
                                       "kernels": len(group_ops(ops)), "cpu_ops": len(graph.ops)}}
    return dataclasses.replace(graph, ops=ops, meta=meta)


# Fused kernels the profiler names by their own kernel rather than FusionOp_<members>.
NAMED_FUSIONS = {("BNTrainingReduceGrad", "Conv2DBackpropFilter"): "FusedDbnDw"}


def kernel_type(group: Sequence[Op]) -> str:
    """The profiler's name of a launched kernel: the op's type, or FusionOp_<types> for a fused group."""
    if len(group) == 1:
        return group[0].type
    types = tuple(op.type for op in group)
    return NAMED_FUSIONS.get(types, "FusionOp_" + "_".join(types))


def kernel_counts(ops: Iterable[Op]) -> Counter[str]:
    """Launched kernels per kernel type (what the public per-op profiles count)."""
    return Counter(kernel_type(g) for g in group_ops(ops))
