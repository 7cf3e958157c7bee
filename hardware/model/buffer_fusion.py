"""Buffer fusion at jit O2 (GE's, the graph sink the public profiles ran): the neighbouring kernels Ascend
launches as one (lowering.py's docstring lists the patterns and their sources)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from hardware.model.ascend_ops import ACTIVATION_GRADS, ACTIVATIONS, MATRIX_FAMILY, WINDOW, make_op, spec_bytes
from hardware.model.opgraph import Op, TensorSpec


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
