"""An OpGraph at any batch and depth from small extractions: extraction cost does not grow with the cell.

Compiling the real step on the CPU backend allocates the step's memory (BERT-large at batch 96 took
21.8 GB of host RAM). For a network of fixed structure, every quantity of the compiled step is affine
in the per-device micro-batch b: each tensor dimension is either constant (weights, features) or
proportional to b (the batch axis, or batch x sequence when flattened), and an op's FLOPs, bytes and
the kept activations are sums of such products with at most one batch factor, c0 + c1*b. So two
extractions at small batches b1 < b2 fix every term exactly: a dimension that differs between them
is scaled by B/b1; FLOPs, bytes and activation bytes are extrapolated along the line through the two
points, in integers. When the two op lists do not align one to one (MindSpore chose other kernels at
the two sizes), or a term is not affine in integers, `scale_batch` returns None and the caller
extracts directly. tests/hardware/test_model_scaling.py checks the result against a direct extraction
at a third batch for every workload.

Depth works the same way for a stack of identical blocks (Transformer layers: a workload names the
preset fields that count them in `Workload.identical_blocks`): the ops one more block adds are
repeated, and the weight, state and activation counts are affine in the number of blocks. ResNet
stages are not identical (each starts with a downsampling block), nor are encoder-decoder stacks
(every decoder block reads the encoder output: its gradient is one AddN whose arity grows with the
depth); they are scaled in batch only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from hardware.model.opgraph import Op, OpGraph, TensorSpec

REFERENCE_BATCHES = (2, 4)       # small, and not 1: at batch 1 MindSpore may squeeze the batch axis away


def compile_batches(micro_batch: int) -> tuple[int, ...]:
    """The batches to compile for a graph at `micro_batch`: the two references above them (it is scaled
    from those), else the micro-batch itself."""
    return REFERENCE_BATCHES if micro_batch > REFERENCE_BATCHES[-1] else (micro_batch,)


def affine(v1: int, v2: int, b1: int, b2: int, b: int) -> int | None:
    """The integer on the line through (b1, v1) and (b2, v2) at b, or None if it is not an integer."""
    step, rest = divmod((v2 - v1) * (b - b1), b2 - b1)
    return None if rest else v1 + step


def scale_dim(d1: int, d2: int, b1: int, b2: int, b: int) -> int | None:
    if d1 == d2:
        return d1
    if d1 * b2 == d2 * b1 and (d1 * b) % b1 == 0:           # proportional to the batch
        return d1 * b // b1
    return None


def scale_spec(t1: TensorSpec, t2: TensorSpec, b1: int, b2: int, b: int) -> TensorSpec | None:
    if t1.dtype != t2.dtype or len(t1.shape) != len(t2.shape):
        return None
    dims = [scale_dim(x, y, b1, b2, b) for x, y in zip(t1.shape, t2.shape)]
    return None if None in dims else TensorSpec(t1.dtype, tuple(dims))  # type: ignore[arg-type]


def scale_op(o1: Op, o2: Op, b1: int, b2: int, b: int) -> Op | None:
    same = (o1.type, o1.scope, o1.unit, o1.phase, o1.fusion_group, len(o1.inputs), len(o1.outputs))
    if same != (o2.type, o2.scope, o2.unit, o2.phase, o2.fusion_group, len(o2.inputs), len(o2.outputs)):
        return None
    inputs = [scale_spec(x, y, b1, b2, b) for x, y in zip(o1.inputs, o2.inputs)]
    outputs = [scale_spec(x, y, b1, b2, b) for x, y in zip(o1.outputs, o2.outputs)]
    flops, nbytes = affine(o1.flops, o2.flops, b1, b2, b), affine(o1.bytes, o2.bytes, b1, b2, b)
    if None in inputs or None in outputs or flops is None or nbytes is None:
        return None
    return dataclasses.replace(o1, inputs=tuple(inputs), outputs=tuple(outputs), flops=flops, bytes=nbytes)


def scale_batch(g1: OpGraph, g2: OpGraph, batch: int) -> OpGraph | None:
    """`g1`/`g2` extracted at micro-batches b1 < b2 with everything else equal, scaled to `batch`."""
    b1, b2 = g1.batch_size, g2.batch_size
    constant = ("workload", "preset", "grad_accum", "param_count", "param_bytes")
    if not b1 < b2 or len(g1.ops) != len(g2.ops) or any(getattr(g1, k) != getattr(g2, k) for k in constant):
        return None
    if g1.meta.get("state_bytes") != g2.meta.get("state_bytes"):
        return None
    ops = [scale_op(x, y, b1, b2, batch) for x, y in zip(g1.ops, g2.ops)]
    activation = affine(g1.activation_bytes, g2.activation_bytes, b1, b2, batch)
    kept = scale_kept(g1.meta, g2.meta, b1, b2, batch)
    if None in ops or activation is None or kept is None:
        return None
    meta = recount({**scale_casts(g1.meta, g2.meta, b1, b2, batch), "scaled_from_batches": [b1, b2],
                    "kept_activations": kept}, ops)  # type: ignore[arg-type]
    return dataclasses.replace(g1, batch_size=batch, ops=tuple(ops), activation_bytes=activation,  # type: ignore[arg-type]
                               meta=meta)


def scale_kept(m1: dict[str, Any], m2: dict[str, Any], x1: int, x2: int, x: int,
               new_kinds: bool = False) -> list[list[Any]] | None:
    """The extraction's `kept_activations` ([producer, output, readers, tensors, bytes, elements]) at `x`:
    tensors, bytes and elements affine in the batch or the depth, like `activation_bytes` (memory.py's
    bitmask accounting reads them). None when the two extractions keep different kinds of tensor, except,
    with `new_kinds` (depth), kinds the second keeps and the first does not: a tensor one block keeps for
    the next exists between blocks only, so none at one block and n at two is (depth - 1)·n, the line
    through zero. A kind the second loses is never affine, and refused."""
    k1, k2 = m1.get("kept_activations") or [], m2.get("kept_activations") or []
    kinds1, kinds2 = [tuple(e[:3]) for e in k1], [tuple(e[:3]) for e in k2]
    if kinds1 != kinds2:
        if not new_kinds or len(set(kinds1)) != len(kinds1) or not set(kinds1) <= set(kinds2):
            return None
        by_kind = {tuple(e[:3]): e for e in k1}
        k1 = [by_kind.get(kind, [*kind, *[0] * (len(e) - 3)]) for kind, e in zip(kinds2, k2)]
    out = []
    for e1, e2 in zip(k1, k2):
        values = [affine(int(a), int(b), x1, x2, x) for a, b in zip(e1[3:], e2[3:])]
        if None in values:
            return None
        out.append([*e1[:3], *values])
    return out


def scale_casts(m1: dict[str, Any], m2: dict[str, Any], x1: int, x2: int, x: int) -> dict[str, Any]:
    """`m1` with the extraction's tally of backend Casts (`backend_casts`, per phase: count and bytes; for
    reading, no prediction uses it) at `x`, or without it where the two tallies do not line up."""
    c1, c2 = m1.get("backend_casts"), m2.get("backend_casts")
    out = {k: v for k, v in m1.items() if k != "backend_casts"}
    if c1 is None or c2 is None or set(c1) != set(c2) or any(c1[p]["count"] != c2[p]["count"] for p in c1):
        return out
    scaled = {p: {"count": c1[p]["count"], "bytes": affine(c1[p]["bytes"], c2[p]["bytes"], x1, x2, x)} for p in c1}
    if all(v["bytes"] is not None for v in scaled.values()):
        out["backend_casts"] = scaled
    return out


def recount(meta: dict[str, Any], ops: list[Op]) -> dict[str, Any]:
    """`meta` with the op tallies of `hardware.model.graph.graph_meta` taken over `ops`."""
    tallies: dict[str, dict[str, int]] = {"op_types": {}, "ops_by_phase": {}, "flops_by_phase": {}}
    for op in ops:
        for name, key, amount in (("op_types", op.type, 1), ("ops_by_phase", op.phase, 1),
                                  ("flops_by_phase", op.phase, op.flops)):
            tallies[name][key] = tallies[name].get(key, 0) + amount
    return {**meta, **{name: dict(sorted(t.items())) for name, t in tallies.items()}}


# --- depth: stacks of identical blocks -------------------------------------------------------------

REFERENCE_DEPTHS = (1, 2)        # blocks per stack in the two small extractions
BLOCK_INDEX = re.compile(r"(CellList/)1-")


def op_signature(op: Op) -> tuple[Any, ...]:
    """What must match for two ops to be the same kernel. Not the scope: when MindSpore merges nodes the
    kernel takes one of their scopes, and which one can change with the depth (a LayerNormGrad named
    after the MLM head at one block is named after layer 0's norm at two)."""
    return (op.type, op.phase, op.unit, op.fusion_group, op.inputs, op.outputs)


def block_copy(op: Op, index: int) -> Op:
    """`op` of block 1 as it appears in block `index` (its scope names the block's place in the CellList)."""
    return dataclasses.replace(op, scope=BLOCK_INDEX.sub(rf"\g<1>{index}-", op.scope))


def grow_variadic(o1: Op, o2: Op, depth: int) -> Op | None:
    """One op over every parameter (AddN of the per-parameter overflow flags of dynamic loss scaling: 30
    inputs at one BERT block, 46 at two) at `depth`: the inputs the second block added, once per block,
    with flops and bytes affine. None unless that is all that differs (same kernel, outputs and leading
    inputs)."""
    d1, d2 = REFERENCE_DEPTHS
    same = (o1.type, o1.phase, o1.unit, o1.fusion_group, o1.outputs)
    if same != (o2.type, o2.phase, o2.unit, o2.fusion_group, o2.outputs) or len(o2.inputs) <= len(o1.inputs) \
            or o2.inputs[:len(o1.inputs)] != o1.inputs:
        return None
    added = o2.inputs[len(o1.inputs):]
    flops, nbytes = affine(o1.flops, o2.flops, d1, d2, depth), affine(o1.bytes, o2.bytes, d1, d2, depth)
    if flops is None or nbytes is None:
        return None
    return dataclasses.replace(o2, inputs=o2.inputs + added * (depth - d2), flops=flops, bytes=nbytes)


def scale_depth(g1: OpGraph, g2: OpGraph, depth: int) -> OpGraph | None:
    """`g1`/`g2` extracted with 1 and 2 blocks per stack (all else equal), extended to `depth` blocks.

    The ops that the second block adds are found by aligning the two op lists (difflib); each added run
    is repeated for blocks 2..depth-1 next to itself: after it, or before it when the run starts in
    backward (which visits blocks in reverse; MindSpore interleaves optimizer updates with it). Counts of weights, states and kept activations
    are affine in the depth, like the batch terms above. None when the lists differ by anything but
    insertions and ops over every parameter that grow by the block's (a block that is not a plain repeat)."""
    import difflib

    ops1, ops2 = g1.ops, g2.ops
    matcher = difflib.SequenceMatcher(a=[op_signature(o) for o in ops1], b=[op_signature(o) for o in ops2],
                                      autojunk=False)
    out: list[Op] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        run = list(ops2[j1:j2])
        if tag == "equal":
            out += run
        elif tag == "insert":
            copies = [[block_copy(o, k) for o in run] for k in range(2, depth)]
            if run[0].phase == "backward":
                out += [o for copy in reversed(copies) for o in copy] + run
            else:
                out += run + [o for copy in copies for o in copy]
        elif tag == "replace" and i2 - i1 == j2 - j1 == 1 and (grown := grow_variadic(ops1[i1], run[0], depth)):
            out.append(grown)
        else:
            return None
    d1, d2 = REFERENCE_DEPTHS
    counts = {k: affine(getattr(g1, k), getattr(g2, k), d1, d2, depth)
              for k in ("param_count", "param_bytes", "activation_bytes")}
    state = affine(int(g1.meta.get("state_bytes", 0)), int(g2.meta.get("state_bytes", 0)), d1, d2, depth)
    kept = scale_kept(g1.meta, g2.meta, d1, d2, depth, new_kinds=True)
    if None in counts.values() or state is None or kept is None:
        return None
    meta = recount({**{k: v for k, v in g2.meta.items() if k != "kept_list"},    # its op positions are g2's
                    "scaled_from_depths": list(REFERENCE_DEPTHS), "state_bytes": state, "kept_activations": kept}, out)
    return dataclasses.replace(g2, ops=tuple(out), meta=meta, **counts)  # type: ignore[arg-type]
