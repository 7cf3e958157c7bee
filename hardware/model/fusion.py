"""Which ops graph-kernel fusion (`graph_kernel=true`, or jit O1 on Ascend) merges into one kernel.

The rule follows MindSpore's graph-kernel pass (`backend/common/graph_kernel`: composite ops are
first expanded into basic ops by the expanders, then `basic_ops_fusion` merges neighbouring
basic ops):

- Fusible: elementwise and broadcast ops (arithmetic, activations and their gradients, casts,
  compares, selects), reductions, and the composite ops the expanders split into those
  (Softmax, LayerNorm, BiasAddGrad, GeLU, SiLU, AddN, ... and their gradients).
- Never fused: matrix ops (Conv2D*, MatMul, BatchMatMul: Cube kernels), BatchNorm (kept as a
  library kernel), data movement (Transpose, Gather, Concat, Slice, ...), optimizer updates
  (`Apply*`), and anything unknown.
- A chain grows from one op to the next in execution order when both are fusible, they belong
  to the same phase, and the next op reads a tensor of the previous op's output shape and dtype
  (the data-flow edge, as OpGraph carries no explicit edges). A reduction ends its chain
  (elementwise -> reduce fusion; the reduced result starts a new kernel).

A chain of one op is not a fusion: it keeps `fusion_group=None`. Pure and deterministic.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from hardware.model.opgraph import Op, OpGraph

ELEMENTWISE = frozenset({
    "Add", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "Neg", "Abs", "Exp", "Log", "Log1p", "Sqrt",
    "Rsqrt", "Reciprocal", "Square", "Pow", "Maximum", "Minimum", "Sign", "Floor", "Round", "Erf",
    "ReLU", "ReluGrad", "ReLU6", "ReLU6Grad", "Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad", "GeLU",
    "GeLUGrad", "FastGeLU", "FastGeLUGrad", "SiLU", "SiLUGrad", "HSwish", "HSwishGrad", "HSigmoid",
    "HSigmoidGrad", "Softplus", "LeakyReLU", "Cast", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Select", "MaskedFill", "AddN", "BiasAdd",
    "Muls", "Adds", "OnesLike", "ZerosLike", "BroadcastTo", "Tile", "IsFinite", "SqrtGrad", "RsqrtGrad",
    "Assign", "AssignAdd", "DropoutGrad", "SigmoidCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogitsGrad",
})
REDUCTIONS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceAll", "ReduceAny",
                        "SumExt", "MeanExt", "BiasAddGrad", "Softmax", "LogSoftmax", "SoftmaxGrad",
                        "LogSoftmaxGrad", "LayerNorm", "LayerNormGrad", "L2Loss", "SquareSumAll"})


def fusible(op: Op) -> bool:
    return op.unit == "vector" and (op.type in ELEMENTWISE or op.type in REDUCTIONS)


def feeds(prev: Op, nxt: Op) -> bool:
    """`nxt` reads a tensor shaped and typed like one of `prev`'s outputs (the chain's data edge)."""
    return any(t in prev.outputs for t in nxt.inputs)


def fusion_groups(ops: Sequence[Op]) -> list[int | None]:
    """The fusion group of each op (None: a kernel of its own); groups are numbered in order from 0."""
    chain_of: list[int] = []            # chain id per op (every op starts or extends one)
    for i, op in enumerate(ops):
        prev = ops[i - 1] if i else None
        extends = (prev is not None and fusible(op) and fusible(prev) and prev.phase == op.phase
                   and prev.type not in REDUCTIONS and feeds(prev, op))
        chain_of.append(chain_of[-1] if extends else i)
    sizes: dict[int, int] = {}
    for chain in chain_of:
        sizes[chain] = sizes.get(chain, 0) + 1
    numbers: dict[int, int] = {}
    groups: list[int | None] = []
    for chain in chain_of:
        if sizes[chain] < 2:
            groups.append(None)
        else:
            groups.append(numbers.setdefault(chain, len(numbers)))
    return groups


def apply_fusion(graph: OpGraph) -> OpGraph:
    """The graph with `fusion_group` set on every op that graph-kernel fusion merges."""
    groups = fusion_groups(graph.ops)
    ops = tuple(dataclasses.replace(op, fusion_group=g) for op, g in zip(graph.ops, groups))
    fused = [g for g in groups if g is not None]
    meta = {**graph.meta, "fusion": {"groups": len(set(fused)), "fused_ops": len(fused),
                                     "kernels": len(ops) - len(fused) + len(set(fused))}}
    return dataclasses.replace(graph, ops=ops, meta=meta)
