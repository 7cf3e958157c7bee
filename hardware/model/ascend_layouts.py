"""Layouts and atomic cleans of the Ascend lowering: the TransData kernels a step needs where a kernel reads
another layout than its producer wrote (NC1HWC0, FRACTAL_NZ, FRACTAL_Z), and the AtomicAddrClean before a
kernel whose cores accumulate into its output."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import Sequence

from hardware.model.ascend_ops import (C0, CONV_FAMILY, CONV_WEIGHT_READERS, LAYOUT_FREE, LAYOUTS, MATRIX_FAMILY,
                                      ND_ONLY_UPDATES, WEIGHT_GRADS, channels_of, make_op, padded)
from hardware.model.opgraph import Op, TensorSpec


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
    gradient written in a layout the update cannot read is converted once (`Gradients`). Under an update
    that reads ND only (ND_ONLY_UPDATES: Adam) a conv weight is kept in ND: each forward convolution converts
    its own weight, and each update its FRACTAL_Z gradient (the update's last input)."""
    nd_weights = any(op.phase == "optimizer" and op.type in ND_ONLY_UPDATES for op in ops)
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
            if k == 1 and op.type in CONV_WEIGHT_READERS:
                if nd_weights and op.phase == "forward":
                    out.append(trans_data(t, op))    # the weight, kept in ND for its update
                continue                         # conv weights are stored in FRACTAL_Z
            if not needs_layout(t):
                continue
            if op.type in ND_ONLY_UPDATES and k == len(op.inputs) - 1 and written.get(key) == "WEIGHT":
                out.append(trans_data(t, op))        # a conv weight's gradient, from FRACTAL_Z to ND
                continue
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


# ------------------------------------------------------------------------------ atomic cleans
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
