"""Joining a profiled step's kernels to the lowered graph of the cell that ran it.

The lowering (hardware/model/lowering.py) says which kernels Ascend launches for a cell; a profiler output
says which it did launch. Per kernel type, the kernels of one step are matched in launch order to the lowered
kernels of that type, where the counts agree (otherwise the ordinal means nothing and the type is reported,
not joined). A joined Cube kernel whose Ascend shapes do not give its GEMM (ND or NCHW tensors, as ACLNN
kernels write them) takes the GEMM of its lowered op (compute.gemm_shape); everything else about a kernel
comes from the profiler's own columns. Pure: kernels and lowered ops in, counts and GEMMs out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from hardware.calibration.profiler_kernels import Kernel
from hardware.calibration.table import Row, parse_tensors
from hardware.model.compute import gemm_shape, group_ops
from hardware.model.lowering import kernel_type
from hardware.model.opclass import CUBE_CLASSES, op_class
from hardware.model.opgraph import Op


@dataclass(frozen=True)
class TypeCount:
    """One kernel type's launches per step: profiled, and what the lowering predicts."""

    op_type: str
    profiled: float
    lowered: int

    @property
    def matches(self) -> bool:
        return self.profiled == self.lowered


@dataclass(frozen=True)
class Join:
    """The count match per type, and the GEMM (batch, M, N, K) each joined Cube kernel took from the graph."""

    counts: tuple[TypeCount, ...]
    gemms: dict[tuple[str, int, str, str], tuple[int, int, int, int]]

    def summary(self) -> str:
        prof = sum(c.profiled for c in self.counts)
        low = sum(c.lowered for c in self.counts)
        same = sum(c.profiled for c in self.counts if c.matches)
        near = sum(c.profiled for c in self.counts if abs(c.lowered - c.profiled) <= 0.1 * c.profiled)
        return (f"{prof:g} kernels per step profiled, {low} lowered; of the profiled, {same / prof:.0%} are of a type "
                f"whose count the lowering matches, {near / prof:.0%} within 10% (the lowering test's bound)")


def join(kernels: Sequence[Kernel], steps: int, lowered: Sequence[Op]) -> Join:
    """Counts per type (per step) and the GEMMs of the joined Cube kernels of `kernels` (all steps)."""
    groups = group_ops(lowered)
    by_type: dict[str, list[list[Op]]] = {}
    for g in groups:
        by_type.setdefault(kernel_type(g), []).append(g)
    profiled = Counter(k.op_type for k in kernels)
    counts = tuple(TypeCount(t, profiled[t] / steps, len(by_type.get(t, ())))
                   for t in sorted(set(profiled) | set(by_type)))
    joinable = {c.op_type for c in counts if c.matches and c.lowered}
    seen: Counter[str] = Counter()
    gemms: dict[tuple[str, int, str, str], tuple[int, int, int, int]] = {}
    for k in kernels:
        if k.op_type not in joinable:
            continue
        group = by_type[k.op_type][seen[k.op_type] % len(by_type[k.op_type])]
        seen[k.op_type] += 1
        cube = next((op for op in group if op_class(op.type, op.unit) in CUBE_CLASSES), None)
        if cube is not None and shape_gemm(k) is None:
            gemms.setdefault((k.op_type, k.block_dim, k.inputs, k.outputs), gemm_shape(cube))
    return Join(counts, gemms)


def shape_gemm(k: Kernel) -> tuple[int, int, int, int] | None:
    """The GEMM the kernel's own Ascend-format shapes give (table.Row.gemm), None if they give none."""
    return Row(network="", batch=0, op_type=k.op_type, count=1, duration_us=k.duration_us,
               inputs=parse_tensors(k.inputs), outputs=parse_tensors(k.outputs)).gemm


def count_lines(j: Join, label: str) -> list[str]:
    """The kernel-count match per type, mismatches first."""
    lines = [f"kernel counts per step, {label}: {j.summary()}",
             f"  {'kernel type':<48} {'profiled':>9} {'lowered':>8}"]
    for c in sorted(j.counts, key=lambda c: (c.matches, c.op_type)):
        lines.append(f"  {c.op_type:<48} {c.profiled:>9g} {c.lowered:>8} {'' if c.matches else '  differs'}")
    return lines
