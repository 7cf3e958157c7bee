"""The Casts a chip's precision mode inserts around fp32 Cube kernels it runs in fp16.

On a chip whose Cube has no fp32 path (the 910A, the 310P), MindSpore's default precision mode
(allow_fp32_to_fp16) runs an fp32 convolution or matrix multiply in fp16: the kernel reads and writes fp16,
and the backend converts its fp32 operands in and its result out with Cast kernels of their own. AMP O1-O3
compute those ops in fp16 already, so the casts are an O0 cost only: the reason AMP pays more on such a chip
than its halved Vector traffic alone.

Which tensors are cast is read off the per-op profile of the zh-CN migration guide's ResNet-50 sample (batch
32 on an Ascend 910, MindSpore 1.8; hardware/calibration/data/docs18_resnet50_ops.csv): at O0 it runs 262
Cast kernels (6.09 of 37.5 ms of AI-Core time) beside 53 convolutions, about five per convolution; at O3 its
five costliest op types hold none. Five per convolution is what casting each distinct fp32 tensor once gives:
the forward kernel's input in and output out, the input gradient's incoming gradient in and result out, the
weight gradient out; the weight gradient reads the fp16 copies the other two made (one graph, one copy per
tensor), and weights reach the Cube without a Cast kernel. estimate: that the same five hold for every Cube
kernel and under buffer fusion (the sample's run fused nothing) is this module's reading; no other public
per-op profile of an fp32 step on these chips exists here. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from hardware.model.ascend_ops import MATRIX_FAMILY, make_op
from hardware.model.opgraph import Op, TensorSpec

FP32, FP16 = "Float32", "Float16"
CONV_KERNELS = frozenset({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"})
# Kernels that write a weight's gradient: they read the fp16 copies their partners made.
WEIGHT_GRADIENTS = frozenset({"Conv2DBackpropFilter"})
# Matrix kernels whose second operand is an activation too (attention's products), not a weight.
TWO_ACTIVATIONS = frozenset({"BatchMatMul", "BatchMatMulExt"})


def is_cube(op: Op) -> bool:
    return op.type in CONV_KERNELS or op.type in MATRIX_FAMILY


def weight_shapes(ops: Sequence[Op]) -> frozenset[tuple[int, ...]]:
    """Shapes of the weights the forward matrix kernels read (their gradients are weight gradients)."""
    return frozenset(t.shape for op in ops if op.phase == "forward" and op.type in MATRIX_FAMILY
                     and op.type not in TWO_ACTIVATIONS for t in op.inputs[1:2])


def is_weight_gradient(op: Op, weights: frozenset[tuple[int, ...]]) -> bool:
    return op.type in WEIGHT_GRADIENTS or (op.phase != "forward" and op.type in MATRIX_FAMILY
                                           and any(t.shape in weights for t in op.outputs))


def cast_inputs(op: Op, weights: frozenset[tuple[int, ...]]) -> tuple[TensorSpec, ...]:
    """The fp32 operands this kernel casts in itself (see the module docstring for the rule)."""
    if is_weight_gradient(op, weights):
        return ()
    operands = op.inputs[:2] if op.type in TWO_ACTIVATIONS else op.inputs[:1]
    return tuple(t for t in operands if t.dtype == FP32)


def narrowed(t: TensorSpec) -> TensorSpec:
    return TensorSpec(FP16, t.shape)


def cast_kernel(like: Op, src: TensorSpec, dst: TensorSpec) -> Op:
    return make_op("Cast", like, (src,), (dst,), src.elements)


def with_casts(op: Op, weights: frozenset[tuple[int, ...]]) -> list[Op]:
    """The Cube kernel reading and writing fp16, between the Casts of its fp32 operands and result."""
    ins = cast_inputs(op, weights)
    outs = tuple(t for t in op.outputs if t.dtype == FP32)
    if not is_cube(op) or op.fusion_group is not None or not (ins or outs):
        return [op]
    copies = op.inputs if is_weight_gradient(op, weights) else ins      # read as fp16: its own casts' or partners'
    inputs = tuple(narrowed(t) if t in copies and t.dtype == FP32 else t for t in op.inputs)
    outputs = tuple(narrowed(t) if t in outs else t for t in op.outputs)
    cube = replace(op, inputs=inputs, outputs=outputs,
                   bytes=max(op.bytes - sum(t.nbytes for t in (*op.inputs, *op.outputs))
                             + sum(t.nbytes for t in (*inputs, *outputs)), 0))
    return ([cast_kernel(op, t, narrowed(t)) for t in ins] + [cube]
            + [cast_kernel(op, narrowed(t), t) for t in outs])


def precision_casts(ops: Sequence[Op]) -> list[Op]:
    """Every fp32 Cube kernel as its chip runs it in fp16, with the Cast kernels around it."""
    weights = weight_shapes(ops)
    return [k for op in ops for k in with_casts(op, weights)]
