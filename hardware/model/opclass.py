"""What a kernel does, by its op type: the class whose calibrated efficiency costs it.

Ascend's kernel names (Conv2D, Conv2DBackpropInput, BNTrainingReduce, TransData, FusionOp_A_B, ...)
and the CPU backend's (BatchNorm, ReLU, ...) map to the same few classes, so one table serves the
lowered Ascend step, the CPU step and the per-op profiles the tables are fitted on. A fused kernel
`FusionOp_A_B_...` takes the class of its Cube member if it has one, else of its first member.

A MatMul whose reduction is longer than both sides of its output (a weight gradient, K = the tokens it
sums over) is `matmul_long_k`, as a convolution's filter gradient has a class of its own: it has few
output tiles, each accumulated over a long K, and in the Ascend 910 profile of BERT-base (An et al.)
such GEMMs run at up to 0.65 of the Cube peak where forward GEMMs of the same work per core run at 0.27.

Ascend's fused attention kernels (FlashAttentionScore and its gradient) are classes of their own: Cube GEMMs
and Vector softmax on tiles that stay on chip, costed by the chip's measured flash tables (FLASH_CLASSES).
"""

from __future__ import annotations

CUBE_CLASSES = ("conv_forward", "conv_input_grad", "conv_filter_grad", "matmul", "matmul_long_k", "batch_matmul")
VECTOR_CLASSES = ("elementwise", "reduction", "data_movement")
FLASH_CLASSES = ("flash_attention", "flash_attention_grad")
FLASH_KERNELS = {"FlashAttentionScore": "flash_attention", "FlashAttentionScoreGrad": "flash_attention_grad"}

CONV_FORWARD = ("Conv2D", "Conv3D", "Conv2DCompress", "DepthwiseConv2dNative", "DepthwiseConv2D")
CONV_INPUT_GRAD = ("Conv2DBackpropInput", "Conv3DBackpropInput", "Conv2DTranspose", "Conv3DTranspose",
                   "DepthwiseConv2dNativeBackpropInput", "Deconvolution")
CONV_FILTER_GRAD = ("Conv2DBackpropFilter", "Conv3DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter")
MATMUL = ("MatMul", "MatMulV2", "MatMulV3", "Dense", "FullyConnection", "MatMulAllReduce")
BATCH_MATMUL = ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "GroupedMatmul")
REDUCTION = (
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceAll", "ReduceAny", "ArgMax",
    "ArgMin", "ArgMaxWithValue", "ArgMinWithValue", "BNTrainingReduce", "BNTrainingReduceGrad",
    "BNTrainingUpdateGrad", "BatchNorm", "BatchNormGrad", "BiasAddGrad", "LayerNorm", "LayerNormGrad",
    "LayerNormV3", "LayerNormXBackpropV2", "LayerNormBetaGammaBackpropV2", "LayerNormXBackprop",
    "LayerNormBetaGammaBackprop", "Softmax", "SoftmaxV2", "SoftmaxGrad", "SoftmaxGradExt", "LogSoftmax",
    "LogSoftmaxV2", "LogSoftmaxGrad", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
    "SigmoidCrossEntropyWithLogits", "SquareSumV1", "SquareSumV2", "SquareSumAll", "L2Loss",
    "ClipByNormNoDivSum", "MaxPool", "MaxPoolWithArgmax", "MaxPoolGradWithArgmax", "MaxPoolGrad",
    "MaxPool3DWithArgmax", "MaxPool3DGradWithArgmax", "AvgPool", "AvgPoolGrad", "AvgPoolV2", "AvgPoolGradV2",
    "GroupNorm", "InstanceNorm", "RmsNorm", "RmsNormGrad", "UnsortedSegmentSum", "CumSum", "Cumsum", "TopK",
)
DATA_MOVEMENT = (
    "TransData", "Transpose", "TransposeD", "ConfusionTransposeD", "Concat", "ConcatD", "ConcatV2", "Split",
    "SplitD", "SplitV", "StridedSlice", "StridedSliceGrad", "StridedSliceD", "Slice", "SliceD", "Gather",
    "GatherV2", "GatherD", "GatherDGrad", "GatherDGradV2", "GatherNd", "ScatterNd", "TensorScatterUpdate",
    "Tile", "TileD", "BroadcastTo", "Reshape", "ExpandDims", "Squeeze", "Flatten", "TensorMove", "Identity",
    "Pad", "PadD", "PadV3", "ResizeNearestNeighbor", "ResizeNearestNeighborV2", "ResizeNearestNeighborGrad",
    "ResizeNearestNeighborV2Grad", "ResizeBilinear", "ResizeBilinearGrad", "OneHot", "OneHotD",
    "AtomicAddrClean", "MemSet", "EmbeddingLookup", "MaskedFill", "Select", "ReverseV2", "Unstack", "Stack",
    "Pack", "Unpack",
)
BY_TYPE = {**{t: "conv_forward" for t in CONV_FORWARD}, **{t: "conv_input_grad" for t in CONV_INPUT_GRAD},
           **{t: "conv_filter_grad" for t in CONV_FILTER_GRAD}, **{t: "matmul" for t in MATMUL},
           **{t: "batch_matmul" for t in BATCH_MATMUL}, **{t: "reduction" for t in REDUCTION},
           **{t: "data_movement" for t in DATA_MOVEMENT}, **FLASH_KERNELS}


def members(op_type: str) -> tuple[str, ...]:
    """The op types inside an Ascend fused kernel name (`FusionOp_Conv2D_BNTrainingReduce`)."""
    if op_type.startswith("FusionOp_"):
        return tuple(op_type[len("FusionOp_"):].split("_"))
    return (op_type,)


def op_class(op_type: str, unit: str | None = None) -> str:
    """The class of one kernel type; `unit` ("cube"/"vector", when known) breaks ties for names not listed:
    an unlisted Cube op counts as a MatMul, an unlisted Vector op as elementwise."""
    kinds = [BY_TYPE.get(name) for name in members(op_type)]
    cube = [k for k in kinds if k in CUBE_CLASSES or k in FLASH_CLASSES]
    if cube:
        return cube[0]
    if unit == "cube":
        return "matmul"
    return kinds[0] or "elementwise"


def gemm_class(kind: str, m: int, n: int, k: int) -> str:
    """The class of a Cube kernel once its GEMM is known: a MatMul with K > max(M, N) is `matmul_long_k`."""
    return "matmul_long_k" if kind == "matmul" and k > max(m, n) else kind
