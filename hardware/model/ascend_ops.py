"""The vocabulary of the Ascend lowering (hardware/model/lowering.py and its passes): Ascend's tile and block
sizes, the op families by the layout they run in, and the helpers that make a kernel like an extracted op."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from hardware.model.opgraph import Op, TensorSpec


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
# Updates that read and write a parameter in ND only: a conv weight kept for them in ND is converted to
# FRACTAL_Z for its forward convolution, and its gradient back to ND for the update, each step. The public
# per-op tables: the Ascend 910 migration sample with nn.Adam (docs r1.8, hardware/calibration/data/
# docs18_resnet50_ops.csv) runs 111 TransData kernels at O0 and 118 at O3 for ResNet-50's 53 convolutions and
# one Dense, where An et al.'s ResNet-50 with Momentum (FusedMulApplyMomentum updates FRACTAL_Z in place)
# runs 9 (hardware/calibration/ascend_kernel_counts.toml).
ND_ONLY_UPDATES = frozenset({"Adam"})
ACTIVATIONS = frozenset({"GeLU", "FastGeLU", "Tanh", "ReLU"})
ACTIVATION_GRADS = frozenset({"GeLUGrad", "FastGeLUGrad"})


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
