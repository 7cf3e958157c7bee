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
import math
from collections import Counter, OrderedDict
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from hardware.model.compile_mode import compile_mode
from hardware.model.compute import group_ops
from hardware.model.fused_optimizers import float_status_check, fuse_lamb
from hardware.model.opgraph import Op, OpGraph, TensorSpec
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings

C0 = 16                      # channels per NC1HWC0 block; edge of a FRACTAL_Z/NZ tile (Ascend's 16x16 Cube)
WINDOW = 12                  # how far ahead (in execution order) a fusion partner is looked for
FP32 = "Float32"

CONV_FAMILY = frozenset({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "BNTrainingReduce",
                         "BNTrainingUpdate", "BNTrainingUpdateGrad", "BNTrainingReduceGrad", "ReLUV2",
                         "ReluGradV2", "MaxPoolWithArgmax", "MaxPoolGradWithArgmax",
                         "DepthwiseConv2dNative", "AvgPool", "AvgPoolGrad"})
MATRIX_FAMILY = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Dense"})
# Kernels that run in whatever layout their first input has (elementwise, row-wise norms and softmax).
LAYOUT_FREE = frozenset({"Add", "AddN", "Sub", "Mul", "Div", "RealDiv", "Cast", "GeLU", "GeLUGrad", "FastGeLU",
                         "FastGeLUGrad", "Tanh", "TanhGrad", "ReLU", "ReluGrad", "Sigmoid", "SigmoidGrad", "SiLU",
                         "SiLUGrad", "Softmax", "SoftmaxGrad", "SoftmaxGradExt", "LayerNorm", "LayerNormXBackpropV2",
                         "Dropout", "DropoutGrad", "DropoutDoMask", "Transpose", "ConfusionTransposeD", "ReduceSum",
                         "FusedMulAdd", "Neg", "Exp", "Sqrt", "Erf", "MaskedFill", "Select", "Maximum", "Minimum",
                         "BiasAddGrad", "LayerNormBetaGammaBackpropV2", "Square"})
CONV_WEIGHT_READERS = frozenset({"Conv2D", "Conv2DBackpropInput", "DepthwiseConv2dNative"})
LAYOUTS = ("ND", "5HD", "NZ")
WEIGHT_GRADS = frozenset({"Conv2DBackpropFilter"})   # write in the weights' FRACTAL_Z
ACTIVATIONS = frozenset({"GeLU", "FastGeLU", "Tanh", "ReLU"})
ACTIVATION_GRADS = frozenset({"GeLUGrad", "FastGeLUGrad"})


@dataclass(frozen=True)
class Lowering:
    """What the pass applies for one chip and jit level."""

    buffer_fusion: bool          # jit O2: GE's buffer fusion and the fused optimizer kernels
    cores: int                   # AI cores a kernel spreads over (decides the atomic-add split)
    fold_casts: bool             # the compiler folds dtype conversion into the neighbouring kernels


def lowering_for(settings: Settings, profile: HardwareProfile) -> Lowering | None:
    """None where the profile's device is not an NPU: the CPU keeps the CPU backend's kernels."""
    if profile.profile.kind != "npu":
        return None
    return Lowering(buffer_fusion=compile_mode(settings, profile).buffer_fusion, cores=profile.cube.cores,
                    fold_casts=profile.precision.fuses_casts)


# ------------------------------------------------------------------------------------------ helpers
def spec_bytes(specs: Iterable[TensorSpec]) -> int:
    return sum(t.nbytes for t in specs)


def padded(spec: TensorSpec) -> TensorSpec:
    """The tensor as NC1HWC0 stores it: an NCHW tensor's channels rounded up to 16."""
    if len(spec.shape) != 4:
        return spec
    n, c, h, w = spec.shape
    return TensorSpec(spec.dtype, (n, math.ceil(c / C0) * C0, h, w))


def mask_spec(spec: TensorSpec) -> TensorSpec:
    """ReLUV2's bitmask: one bit per (padded) element, stored as (N, C1, H, W, 2) UInt8 (the profile's shape)."""
    n, c, h, w = spec.shape
    return TensorSpec("UInt8", (n, math.ceil(c / C0), h, w, C0 // 8))


def make_op(type_: str, like: Op, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], flops: int,
            unit: str = "vector", nbytes: int | None = None, phase: str | None = None) -> Op:
    ins, outs = tuple(inputs), tuple(outputs)
    return Op(type=type_, scope=like.scope, inputs=ins, outputs=outs, flops=max(int(flops), 0),
              bytes=spec_bytes(ins + outs) if nbytes is None else nbytes, unit=unit,
              phase=phase or like.phase, fusion_group=None)


def channels_of(op: Op) -> int:
    x = op.inputs[0] if op.inputs else None
    return x.shape[1] if x is not None and len(x.shape) == 4 else 1


def stats(channels: int, count: int) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(FP32, (channels,)) for _ in range(count))


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


# --------------------------------------------------------------------- 3. buffer fusion (jit O2)
def same_tensor(a: TensorSpec, b: TensorSpec) -> bool:
    """Whether `b` can be `a` seen through a reshape (Reshape/Flatten are no kernels, so the op list
    shows a (B*T, D) matmul output read as (B, T, D)): same dtype, element count and last axis."""
    return a == b or (a.dtype == b.dtype and a.elements == b.elements and a.shape[-1:] == b.shape[-1:])


def reads(op: Op, t: TensorSpec) -> bool:
    return any(same_tensor(t, x) for x in op.inputs)


def reader(ops: Sequence[Op], i: int, types: Iterable[str], tensor: TensorSpec | None = None) -> int | None:
    """Index of the next op within the window of one of `types` reading `tensor` (default: ops[i]'s output)."""
    wanted = set(types)
    t = tensor if tensor is not None else (ops[i].outputs[0] if ops[i].outputs else None)
    if t is None:
        return None
    for j in range(i + 1, min(len(ops), i + 1 + WINDOW)):
        if ops[j].type in wanted and reads(ops[j], t) and ops[j].fusion_group is None:
            return j
    return None


def merged(type_: str, first: Op, second: Op, unit: str | None = None) -> Op:
    """One graph-level fused kernel out of two (its intermediate tensor stays on chip)."""
    inner = [t for t in first.outputs if reads(second, t)][:1]
    ins = first.inputs + tuple(t for t in second.inputs if not (inner and same_tensor(inner[0], t)))
    outs = tuple(t for t in first.outputs if t not in inner) + second.outputs
    nbytes = max(first.bytes + second.bytes - 2 * spec_bytes(inner), spec_bytes(outs))
    return make_op(type_, first, ins, outs, first.flops + second.flops,
                   unit or ("cube" if "cube" in (first.unit, second.unit) else "vector"), nbytes)


def dbn_dw_fuses(dw: Op) -> bool:
    """Where the profile fuses BNTrainingReduceGrad into the weight gradient (FusedDbnDw): 1x1 convs
    with outputs of 28x28 and more, any conv with outputs of 56x56 and more (ResNet-50 bs32: 20 of 53)."""
    weight = dw.outputs[0].shape if dw.outputs else ()
    dy = dw.inputs[0].shape if dw.inputs else ()
    if len(weight) != 4 or len(dy) != 4:
        return False
    one_by_one = weight[2] == 1 and weight[3] == 1
    return dy[2] >= 56 or (one_by_one and dy[2] >= 28)


def chain_to(ops: Sequence[Op], i: int, last: str, middle: str) -> tuple[int, ...]:
    """ops[i] -> last, or ops[i] -> middle -> last, whichever reader comes first (the profile's
    BNTrainingUpdate (+ Add) + ReLUV2 and Conv2DBackpropInput (+ AddN) + ReluGradV2)."""
    j = reader(ops, i, (last, middle))
    if j is None:
        return ()
    if ops[j].type == last:
        return (i, j)
    k = reader(ops, j, (last,))
    return (i, j, k) if k is not None else ()


class Groups:
    """Numbers fusion groups after the ones the graph already has."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.next = 1 + max((op.fusion_group for op in ops if op.fusion_group is not None), default=-1)

    def tag(self, ops: list[Op], members: Sequence[int]) -> None:
        if any(ops[m].fusion_group is not None for m in members):
            return
        for m in members:
            ops[m] = replace(ops[m], fusion_group=self.next)
        self.next += 1


def graph_fusions(ops: list[Op]) -> list[Op]:
    """The fusion passes that make one new kernel out of two ops (before buffer fusion groups them)."""
    out = list(ops)
    i = 0
    while i < len(out):
        op = out[i]
        pair: tuple[int, str, str | None] | None = None
        if op.type in MATRIX_FAMILY and op.phase == "forward":
            j = reader(out, i, ("BiasAdd",))
            if j is not None:
                pair = (j, op.type, "cube")
        elif op.type == "Mul" and op.phase == "forward":
            j = reader(out, i, ("Add",))
            if j is not None and op.outputs and len(op.outputs[0].shape) >= 3:
                pair = (j, "FusedMulAdd", None)
        elif op.type == "SoftmaxGrad":
            j = reader(out, i, ("Mul",))
            if j is not None:
                pair = (j, "SoftmaxGradExt", None)
        elif op.type == "Mul" and op.phase == "optimizer":
            j = reader(out, i, ("ApplyMomentum",))
            if j is not None:
                pair = (j, "FusedMulApplyMomentum", None)
        if pair is not None:
            j, name, unit = pair
            out[i] = merged(name, op, out[j], unit)
            del out[j]
        i += 1
    return out


def buffer_fusion(ops: list[Op]) -> list[Op]:
    """GE's buffer fusion: the chains of the profiles become one kernel each (shared fusion_group)."""
    out = graph_fusions(ops)
    groups = Groups(out)
    for i, op in enumerate(out):
        if op.fusion_group is not None:
            continue
        t = op.type
        if t == "Conv2D":
            j = reader(out, i, ("BNTrainingReduce",))
            if j is not None:
                groups.tag(out, (i, j))
        elif t == "BNTrainingReduceGrad":
            j = reader(out, i, ("Conv2DBackpropFilter",))
            if j is not None and dbn_dw_fuses(out[j]):
                groups.tag(out, (i, j))
        elif t in ("BNTrainingUpdate", "Conv2DBackpropInput"):
            chain = chain_to(out, i, "ReLUV2" if t == "BNTrainingUpdate" else "ReluGradV2",
                             "Add" if t == "BNTrainingUpdate" else "AddN")
            if chain:
                groups.tag(out, chain)
        elif t in MATRIX_FAMILY and op.phase == "forward":
            j = reader(out, i, ACTIVATIONS | {"FusedMulAdd"})
            if j is not None:
                groups.tag(out, (i, j))
        elif t == "MatMul" and op.phase in ("backward", "recompute"):
            j = reader(out, i, ACTIVATION_GRADS | {"AddN", "Mul"})
            if j is not None:
                groups.tag(out, (i, j))
    return out


# ------------------------------------------------------------------------------------ 4. layouts
def layout_class(op: Op) -> str:
    """The layout a kernel runs in: 5HD (NC1HWC0), NZ (FRACTAL_NZ), ANY (follows its input) or ND."""
    if op.type in CONV_FAMILY:
        return "5HD"
    if op.type in MATRIX_FAMILY:
        return "NZ"
    if op.type in LAYOUT_FREE:
        return "ANY"
    return "ND"


def needs_layout(t: TensorSpec) -> bool:
    """Scalars and vectors look the same in every layout: no conversion."""
    return len(t.shape) >= 2


def layout_key(t: TensorSpec) -> tuple[int, ...]:
    """A tensor, its views (ExpandDims/Squeeze are no kernels) and its casts share one layout."""
    return tuple(d for d in t.shape if d != 1)


def pad_channels(op: Op) -> Op:
    """An NC1HWC0 kernel moves its NCHW tensors with their channels padded to 16 (the stem's 3 -> 16)."""
    extra = sum(padded(t).nbytes - t.nbytes for t in (*op.inputs, *op.outputs))
    return replace(op, bytes=op.bytes + extra) if extra else op


def trans_data(t: TensorSpec, like: Op) -> Op:
    """One TransData over tensor `t` (reads it, writes it padded to 16 channels or 16x16 fractals)."""
    if len(t.shape) == 4:
        wide = padded(t)
    else:
        *lead, r, c = t.shape
        wide = TensorSpec(t.dtype, (*lead, math.ceil(r / C0) * C0, math.ceil(c / C0) * C0))
    return make_op("TransData", like, (t,), (wide,), 0, nbytes=t.nbytes + wide.nbytes)


def add_layouts(ops: Sequence[Op]) -> list[Op]:
    """Insert a TransData wherever a kernel reads a tensor in another layout than its writer used.

    A tensor nothing wrote is a parameter or a graph input: ND, except conv weights (kept in FRACTAL_Z,
    as are their gradients). A kernel reads the latest tensor of its shape, and a converted copy serves
    every later reader until that shape is written again. The optimizer is the exception: it reads the
    gradients backward wrote long before, many of one shape (48 of BERT-base's are 768x768), so each
    gradient written in a layout the update cannot read is converted once (`Gradients`)."""
    written: dict[tuple[int, ...], str] = {}
    converted: set[tuple[tuple[int, ...], str]] = set()
    grads = Gradients()
    out: list[Op] = []
    for op in ops:
        own = layout_class(op)
        size = op.outputs[0].elements if op.outputs else 0
        if own == "ANY":
            first = next((t for t in op.inputs if needs_layout(t)), None)
            own = "ND" if first is None else written.get(layout_key(first), "ND")
            if first is not None and (layout_key(first), "ND") in converted:
                own = "ND"                       # a plain copy exists already: run plain
        for k, t in enumerate(op.inputs):
            key = layout_key(t)
            if not needs_layout(t) or (k == 1 and op.type in CONV_WEIGHT_READERS):
                continue                         # conv weights are stored in FRACTAL_Z
            if layout_class(op) == "ANY" and t.elements < size:
                continue                         # a broadcast operand is read as it is
            have = written.get(key, "ND")
            if op.phase == "optimizer" and grads.take(key, own):
                out.append(trans_data(t, op))
                converted.add((key, own))
                continue
            if have in (own, "WEIGHT") or (key, own) in converted:
                continue
            out.append(trans_data(t, op))
            converted.add((key, own))
            grads.take(key, own)
        out.append(pad_channels(op) if own == "5HD" else op)
        if op.phase == "optimizer" and layout_class(op) == "ND":
            continue                             # an update writes the parameter in place, in its own layout
        for t in op.outputs:
            if needs_layout(t):
                key = layout_key(t)
                written[key] = "WEIGHT" if op.type in WEIGHT_GRADS else own
                converted.difference_update({(key, "ND"), (key, "5HD"), (key, "NZ")})
                if op.phase in ("backward", "optimizer") and not any(layout_key(x) == key for x in op.inputs):
                    grads.add(key, written[key])
    return out


class Gradients:
    """Gradients written in backward and not yet converted for the optimizer, per (shape, layout needed).
    A kernel that reads and writes one shape (the unscale Mul) transforms a gradient: not a new one."""

    def __init__(self) -> None:
        self.pending: Counter[tuple[tuple[int, ...], str]] = Counter()

    def add(self, key: tuple[int, ...], layout: str) -> None:
        if layout == "WEIGHT":
            return
        for other in LAYOUTS:
            if other != layout:
                self.pending[(key, other)] += 1

    def take(self, key: tuple[int, ...], layout: str) -> bool:
        """Whether a gradient of this shape still needs converting to `layout` (and count it done)."""
        if self.pending[(key, layout)] <= 0:
            return False
        self.pending[(key, layout)] -= 1
        return True


# ------------------------------------------------------------------------------ 5. atomic cleans
def accumulates(op: Op, cores: int) -> TensorSpec | None:
    """The output a kernel's cores accumulate into with atomic adds (it must be zeroed first), if any."""
    t = op.type
    if t == "Conv2DBackpropFilter" and op.outputs:
        return op.outputs[-1]
    if t == "BNTrainingReduce" and op.outputs:
        return op.outputs[0]
    if t == "BNTrainingUpdateGrad" and op.outputs and math.ceil(channels_of(op) / C0) < cores:
        return op.outputs[0]
    if t == "UnsortedSegmentSum" and op.outputs:            # a scatter-add into the (embedding) gradient
        return op.outputs[0]
    if t in ("ReduceSum", "ReduceMean") and op.outputs and op.inputs \
            and op.inputs[0].elements > cores * 1024 and op.outputs[0].elements < cores:
        return op.outputs[0]
    return None


def add_atomic_cleans(ops: Sequence[Op], cores: int) -> list[Op]:
    """An AtomicAddrClean (writes zeros over the accumulated tensor) before each accumulating kernel;
    one per fused kernel."""
    out: list[Op] = []
    cleaned: set[int] = set()
    for op in ops:
        target = accumulates(op, cores)
        if target is not None and (op.fusion_group is None or op.fusion_group not in cleaned):
            out.append(make_op("AtomicAddrClean", op, (), (target,), 0))
            if op.fusion_group is not None:
                cleaned.add(op.fusion_group)
        out.append(op)
    return out


# ------------------------------------------------------------------------------------ the pass
def lower_ops(ops: Sequence[Op], rules: Lowering) -> list[Op]:
    out = float_status_check(fuse_lamb([k for op in collapse_expansions(ops) for k in ascend_kernels(op)]))
    if rules.fold_casts:
        out = fold_casts(out)
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
