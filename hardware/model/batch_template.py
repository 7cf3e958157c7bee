"""A graph at the second reference batch without compiling it: its batch rules read from a template pair.

Batch scaling (scaling.scale_batch) needs each setting's step at both reference batches only to learn which
tensor dimensions grow with the batch. That is a property of the network, not of the setting: an AMP level,
a loss scaler or recompute adds or retypes kernels, and the kernels they share with another setting of the
same network have the same shapes and the same batch dimensions. So a setting is compiled at the first
reference batch only, and its graph at the second is derived from a template setting compiled at both
(graph.template_settings: the workload's recipe), which a matrix of tips around that recipe compiles anyway.

Each op takes the shapes at the larger batch of its twin in the template, the template op with the same type
and shapes at the smaller batch, told apart where two template ops share those but grow differently by their
phase, then their scope (and then their order among those), and then only if the group's ops come out as
the template group's. An op with no twin (a Cast AMP inserts, a loss scaler's check)
maps each of its tensors by the template's tensor shapes (a step of gradient accumulation also by its whole
input's, the micro-batches it slices), when every one of them is unambiguous, and is not a matrix op (whose FLOPs need attributes the graph does not keep). FLOPs follow the twin (or the element
count), bytes are recounted with the op's own dtypes, and the kept activations are recounted tensor by
tensor from the extraction's `kept_list`. Anything that cannot be derived this way returns None, and the
caller compiles the graph instead. tests/hardware/test_batch_template.py checks derived graphs against
compiled ones.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any, Callable, Hashable, Sequence

from hardware.model.dataflow import peak_live
from hardware.model.opgraph import Op, OpGraph, TensorSpec
from hardware.model.scaling import recount

MATRIX_OPS = frozenset({"Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInput",
                        "Conv2DBackpropFilter", "Conv3DBackpropFilter", "MatMul", "BatchMatMul", "MatMulExt",
                        "BatchMatMulExt", "Dense"})

Shapes = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]
Rule = tuple[Shapes, int, int]          # the shapes at the larger batch, FLOPs at the smaller and at the larger


def shapes(op: Op) -> Shapes:
    return tuple(t.shape for t in op.inputs), tuple(t.shape for t in op.outputs)


def twin_keys(ops: Sequence[Op]) -> list[list[Hashable]]:
    """Per op, its keys from the loosest to the strictest: type and shapes; then the phase; the scope; and
    its place among the ops with that scope, type and shapes."""
    seen: dict[Hashable, int] = {}
    keys = []
    for op in ops:
        scoped = (op.type, shapes(op), op.phase, op.scope)
        seen[scoped] = seen.get(scoped, -1) + 1
        keys.append([scoped[:2], scoped[:3], scoped, (*scoped, seen[scoped])])
    return keys


def ambiguous_groups_agree(keys: list[list[Hashable]], rules: list[Rule | None],
                           template_keys: list[list[Hashable]], template_rules: list[Rule]) -> bool:
    """Where template ops of one phase, type and shapes grow differently, the scope told the cell's apart:
    their rules must then be the template group's, as many of each. MindSpore names a merged kernel after
    any of the nodes it merged, so two steps may give one kernel different scopes: BERT-base's two NSP
    gradient MatMuls, alike at batch 2, are named after the embeddings at O0 and after the NSP head at O2."""
    groups: dict[Hashable, Counter[Rule]] = {}
    for op_keys, rule in zip(template_keys, template_rules):
        groups.setdefault(op_keys[1], Counter())[rule] += 1
    ours: dict[Hashable, Counter[Rule | None]] = {}
    for op_keys, rule in zip(keys, rules):
        if len(groups.get(op_keys[1], ())) > 1:
            ours.setdefault(op_keys[1], Counter())[rule] += 1
    return all(counts == groups[group] for group, counts in ours.items())


def tables(keys: list[list[Hashable]], rules: list[Rule]) -> list[dict[Hashable, Rule | None]]:
    """Per key level, key -> its rule, or None where two template ops share the key but grow differently."""
    out: list[dict[Hashable, Rule | None]] = [{} for _ in keys[0]] if keys else []
    for op_keys, rule in zip(keys, rules):
        for level, key in enumerate(op_keys):
            if key in out[level] and out[level][key] != rule:
                out[level][key] = None
            else:
                out[level].setdefault(key, rule)
    return out


def twin_rule(op_keys: list[Hashable], by_level: list[dict[Hashable, Rule | None]]) -> Rule | None:
    for key, table in zip(op_keys, by_level):
        if key not in table:
            return None
        if table[key] is not None:
            return table[key]
    return None


def tensor_map(small: OpGraph, large: OpGraph, accumulated: int = 1) -> dict[tuple[int, ...], tuple[int, ...] | None]:
    """Every tensor shape of the template at the smaller batch -> its shape at the larger (None: two of its
    tensors of that shape grow differently). With `accumulated` micro-batches per update (a step of
    gradient accumulation over a template without), a tensor whose first dimension grows also exists
    `accumulated` times as long: the step's whole input, which it slices into micro-batches."""
    out: dict[tuple[int, ...], tuple[int, ...] | None] = {}

    def add(x: tuple[int, ...], y: tuple[int, ...]) -> None:
        if x in out and out[x] != y:
            out[x] = None
        else:
            out.setdefault(x, y)

    for a, b in zip(small.ops, large.ops):
        for x, y in zip((*a.inputs, *a.outputs), (*b.inputs, *b.outputs)):
            add(x.shape, y.shape)
    if accumulated > 1:
        for x, y in [(x, y) for x, y in out.items() if y is not None and x and x[0] != y[0]]:
            add((x[0] * accumulated, *x[1:]), (y[0] * accumulated, *y[1:]))
    return out


def retyped(specs: tuple[TensorSpec, ...], new: Sequence[tuple[int, ...]]) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(t.dtype, tuple(shape)) for t, shape in zip(specs, new))


def derive_op(op: Op, rule: Rule | None, tensors: Callable[[tuple[int, ...]], tuple[int, ...] | None]) -> Op | None:
    if rule is not None:
        (ins, outs), flops_small, flops_large = rule
        if op.flops != flops_small:
            return None
        flops = flops_large
    else:
        if op.type in MATRIX_OPS or op.unit == "cube":
            return None
        mapped = [tensors(t.shape) for t in (*op.inputs, *op.outputs)]
        if any(m is None for m in mapped) or op.flops != max((t.elements for t in (*op.inputs, *op.outputs)), default=0):
            return None
        ins, outs = tuple(mapped[:len(op.inputs)]), tuple(mapped[len(op.inputs):])  # type: ignore[arg-type]
        flops = max((math.prod(s) for s in (*ins, *outs)), default=0)  # type: ignore[arg-type]
    inputs, outputs = retyped(op.inputs, ins), retyped(op.outputs, outs)
    return dataclasses.replace(op, inputs=inputs, outputs=outputs, flops=flops,
                               bytes=sum(t.nbytes for t in (*inputs, *outputs)))


def kept_recount(kept_list: list[list[Any]], ops: Sequence[Op]) -> tuple[int, list[list[Any]]]:
    """The peak of the kept tensors and their per-kind tally (dataflow.analyse's), at the ops' shapes."""
    kinds: dict[tuple[str, int, str], list[int]] = {}
    intervals = []
    for position, index, end, readers in kept_list:
        outputs = ops[position].outputs
        spec = outputs[index] if index < len(outputs) else None
        size = spec.nbytes if spec is not None else 0
        intervals.append((position, end, size))
        entry = kinds.setdefault((ops[position].type, index, readers), [0, 0, 0])
        entry[0] += 1
        entry[1] += size
        entry[2] += spec.elements if spec is not None else 0
    return peak_live(intervals), [[p, i, r, *v] for (p, i, r), v in sorted(kinds.items())]


def derive_batch(small: OpGraph, template_small: OpGraph, template_large: OpGraph) -> OpGraph | None:
    """`small` at `template_large`'s batch, by the template pair's batch rules; None where any op or kept
    tensor cannot be derived (module docstring)."""
    b1, b2 = template_small.batch_size, template_large.batch_size
    kept_list = small.meta.get("kept_list")
    if (small.batch_size != b1 or not b1 < b2 or len(template_small.ops) != len(template_large.ops)
            or kept_list is None or (small.workload, small.preset) != (template_small.workload, template_small.preset)):
        return None
    rules = [(shapes(b), a.flops, b.flops) for a, b in zip(template_small.ops, template_large.ops)]
    template_keys, keys = twin_keys(template_small.ops), twin_keys(small.ops)
    by_level = tables(template_keys, rules)
    twins = [twin_rule(op_keys, by_level) for op_keys in keys]
    if not ambiguous_groups_agree(keys, twins, template_keys, rules):
        return None
    accumulated, rest = divmod(small.grad_accum, template_small.grad_accum)
    if rest:
        return None
    by_shape = tensor_map(template_small, template_large, accumulated)
    ops = [derive_op(op, rule, by_shape.get) for op, rule in zip(small.ops, twins)]
    if any(op is None for op in ops):
        return None
    derived: list[Op] = ops  # type: ignore[assignment]
    activation, kept = kept_recount(kept_list, derived)
    meta = {k: v for k, v in small.meta.items() if k != "backend_casts"}    # per-cast shapes are not kept
    meta = recount({**meta, "kept_activations": kept, "batch_rules_from": template_small.key}, derived)
    return dataclasses.replace(small, batch_size=b2, ops=tuple(derived), activation_bytes=activation, meta=meta)
