"""Ascend's kernels for the parts of the update step the CPU backend composes from elementwise primitives.

MindSpore's nn.Lamb takes an Ascend-only path (mindspore/nn/optim/lamb.py, `_update_run_op` on
Ascend; the backend's Lamb fission pass builds the same nodes for the fused primitive): per parameter,
one LambApplyOptimizerAssign (moments and the raw update), the norms of the weight and of the update
(layer.Norm: SquareSumV1 + Sqrt each) and one LambApplyWeightAssign (the trust-ratio step). The public
Ascend 910 profile of BERT-base with Lamb shows exactly that per parameter (An et al., HPCC 2022,
bert_128_32: 206 parameters, 206 LambApplyOptimizerAssign, 412 SquareSumV1, 412 Sqrt, 206
LambApplyWeightAssign). The CPU backend runs the generic path instead: about 30 kernels per parameter
(Mul, Div, Square, Sqrt, ReduceSum, Greater, Select, Assign, ...), which on an NPU would be costed as
thousands of launches and a dozen parameter-sized passes over memory.

The update is the span of the optimizer phase from the first to the last op of the Lamb scope: some of
its Adds carry another layer's debug scope (the CPU backend names a merged node after one of its
sources), so the span, not the scope, decides membership; the learning-rate schedule, the step
counter and ops outside the optimizer phase stay. The parameters are read off the generic path's
Assign kernels: it assigns the first moment, the second moment and the parameter, so each parameter
shape appears three times.

The gradient-overflow check of a dynamic loss scale (mindspore.amp.all_finite) is on Ascend one read of
the device's float-status register (NPUGetFloatStatusV2 + NPUClearFloatStatusV2, runtime tasks rather
than AI Core kernels; no such kernel in the An et al. AI Core profiles of BERT, which trains with a
dynamic loss scale); elsewhere it tests every gradient: IsFinite, then all(), a cast and 1 - status,
four kernels per gradient that the CPU-extracted step holds and an NPU does not run. Pure.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Sequence

from hardware.model.opgraph import Op, TensorSpec

LAMB_SCOPE = "optimizer-Lamb"
KEPT_IN_SCOPE = ("learning_rate", "Expand/")   # the learning-rate schedule and its scalar helpers stay
KEPT_TYPES = frozenset({"AssignAdd"})
ASSIGNS_PER_PARAMETER = 3                # m, v, the parameter
# Elementwise operations per element of LambApplyOptimizerAssign: m = b1*m + (1-b1)*g (3), v = b2*v +
# (1-b2)*g^2 (4), bias corrections (2), m_hat / (sqrt(v_hat) + eps) (3), + weight_decay * w (2).
OPTIMIZER_ASSIGN_FLOPS = 14
WEIGHT_ASSIGN_FLOPS = 2                  # w -= lr * ratio * update
SCALAR = TensorSpec("Float32", ())


def kept(op: Op) -> bool:
    """An op inside the update's span that is not part of it: the schedule, the step counter, another phase."""
    return (op.phase != "optimizer" or op.fusion_group is not None or op.type in KEPT_TYPES
            or any(part in op.scope for part in KEPT_IN_SCOPE))


def generic_lamb(op: Op) -> bool:
    """An op of the generic Lamb update's own scope."""
    return LAMB_SCOPE in op.scope and not kept(op)


def lamb_parameters(assigns: Sequence[Op]) -> list[TensorSpec]:
    """One tensor per parameter, in first-assignment order (each shape is assigned three times per parameter)."""
    seen: Counter[tuple[str, tuple[int, ...]]] = Counter()
    params = []
    for op in assigns:
        target = op.inputs[0] if op.inputs else (op.outputs[0] if op.outputs else None)
        if target is None:
            continue
        key = (target.dtype, target.shape)
        if seen[key] % ASSIGNS_PER_PARAMETER == 0:
            params.append(target)
        seen[key] += 1
    return params


def kernel(type_: str, like: Op, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], flops: int) -> Op:
    ins, outs = tuple(inputs), tuple(outputs)
    return Op(type=type_, scope=like.scope, inputs=ins, outputs=outs, flops=flops,
              bytes=sum(t.nbytes for t in ins + outs), unit="vector", phase="optimizer")


def lamb_update(param: TensorSpec, like: Op) -> list[Op]:
    """The five kernels that update one parameter on Ascend."""
    n = param.elements
    update = TensorSpec("Float32", param.shape)
    grad, m, v = update, update, update
    norm = [kernel("SquareSumV1", like, (t,), (SCALAR,), 2 * n) for t in (param, update)]
    roots = [kernel("Sqrt", like, (SCALAR,), (SCALAR,), 1) for _ in norm]
    return [kernel("LambApplyOptimizerAssign", like, (grad, v, m, param, *(SCALAR,) * 8), (update, v, m),
                   OPTIMIZER_ASSIGN_FLOPS * n),
            norm[0], roots[0], norm[1], roots[1],
            kernel("LambApplyWeightAssign", like, (SCALAR, SCALAR, SCALAR, update, param), (param,),
                   WEIGHT_ASSIGN_FLOPS * n)]


def fuse_lamb(ops: Sequence[Op]) -> list[Op]:
    """The op list with the generic Lamb update replaced by Ascend's kernels, placed where it began."""
    scoped = [i for i, op in enumerate(ops) if generic_lamb(op)]
    if not scoped:
        return list(ops)
    members = [i for i in range(scoped[0], scoped[-1] + 1) if not kept(ops[i])]
    params = lamb_parameters([ops[i] for i in members if ops[i].type == "Assign"])
    if not params:
        return list(ops)
    like = ops[members[0]]
    fused = [k for p in params for k in lamb_update(p, like)]
    dropped = set(members)
    head = list(ops[:members[0]])
    tail = [op for i, op in enumerate(ops) if i > members[0] and i not in dropped]
    return head + fused + tail


OVERFLOW_CHAIN = ("ReduceAll", "Cast", "Sub")     # all(), the cast, 1 - status: what follows each IsFinite


def gradient_test(op: Op) -> bool:
    """IsFinite over a gradient (the loss scale's own scalar test stays)."""
    return (op.type == "IsFinite" and op.phase == "optimizer" and op.fusion_group is None
            and bool(op.inputs) and op.inputs[0].elements > 1)


def float_status_check(ops: Sequence[Op]) -> list[Op]:
    """The op list without the per-gradient overflow tests (Ascend reads its float-status register)."""
    out: list[Op] = []
    chain: deque[TensorSpec] = deque(maxlen=len(OVERFLOW_CHAIN))    # outputs of the tests being dropped
    for op in ops:
        if gradient_test(op):
            chain.extend(op.outputs)
            continue
        if op.type in OVERFLOW_CHAIN and op.fusion_group is None and any(t in op.inputs for t in chain):
            chain.extend(op.outputs)
            continue
        out.append(op)
    return out
