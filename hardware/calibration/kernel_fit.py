"""Fitting a profile's kernel classes to profiled kernels: each kernel's ideal time at its class's peak, the
per-class efficiency step tables over the work per core (or bytes moved), the unaligned factors and the fixed
per-kernel cost, and the per-op-type lines of a cpu profile (`op_costs`). hardware/calibration/derive.py
says what is fitted on which runs, and writes the results into the profiles.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

from hardware.calibration.table import OPAQUE, Row
from hardware.model.compute import (floor_seconds, matrix_tflops, memory_seconds, padded_flops, stream_gbps,
                                    tiles_per_core, vector_tflops, vector_work_elements)
from hardware.model.opclass import CUBE_CLASSES, VECTOR_CLASSES
from hardware.model.profile import EfficiencyTable, HardwareProfile, KernelClasses, OpCost

TILE_GRID = (0, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)                    # Cube tiles per core
BYTES_GRID = (0, 2**16, 2**18, 2**20, 2**22, 2**24, 2**26, 2**28)          # bytes per kernel
FLOOR_BYTES = 4096


def ideal_seconds(row: Row, profile: HardwareProfile) -> float:
    """The kernel's time at the peak its class is measured by: padded Cube FLOPs at the Cube peak of
    its dtype, or its bytes at the bandwidth the model streams them at (L2's where they fit, as
    compute.memory_seconds: the same on an Ascend profile, whose L2 is taken at the HBM rate)."""
    if row.gemm is not None:
        return cube_flops(row, profile) / (matrix_tflops(row.dtype, profile) * 1e12)
    return row.nbytes / (stream_gbps(row.nbytes, profile) * 1e9)


def busy_seconds(row: Row, floor_us: float) -> float:
    """The measured time less the fixed per-kernel cost (at least 1 ns)."""
    return max(row.duration_us - floor_us, 1e-3) * 1e-6


def observed_efficiency(row: Row, profile: HardwareProfile, floor_us: float) -> float:
    """What one kernel achieved against its peak once its fixed cost is taken off (capped at 1: an
    L2-resident kernel can beat the HBM rate)."""
    return min(1.0, ideal_seconds(row, profile) / busy_seconds(row, floor_us))


def cube_flops(row: Row, profile: HardwareProfile) -> float:
    """The FLOPs the Cube really runs for the kernel (its GEMM padded to the tile)."""
    g = row.gemm
    assert g is not None
    return padded_flops(*g, tile=profile.cube.tile)


def work(row: Row, profile: HardwareProfile) -> float:
    """The table index: Cube tiles per core, or bytes moved."""
    g = row.gemm
    if g is not None:
        return tiles_per_core(*g, tile=profile.cube.tile, cores=profile.cube.cores)
    return float(row.nbytes)


def weighted_median(pairs: Sequence[tuple[float, int]]) -> float:
    ordered = sorted(pairs)
    half, seen = sum(w for _, w in ordered) / 2, 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]


def sig(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


def monotone(values: list[float], weights: list[int]) -> list[float]:
    """Weighted pool-adjacent-violators: the closest non-decreasing sequence (more work per core,
    or more bytes, never lowers the achieved efficiency; a dip between bins is noise)."""
    blocks: list[list[float]] = []                  # [value, weight, length]
    for v, w in zip(values, weights):
        blocks.append([v, float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return [b[0] for b in blocks for _ in range(int(b[2]))]


def fit_table(rows: Iterable[Row], profile: HardwareProfile, grid: Sequence[int], floor_us: float) -> EfficiencyTable:
    """A step table on `grid`: each bin's efficiency is its kernels' total work over the total time
    they took at peak (so the bin's summed time is reproduced, which is what a step time adds up),
    made non-decreasing; an empty bin takes its nearest smaller filled bin (else the nearest larger);
    equal neighbours merge."""
    bins: dict[int, list[tuple[float, float, int]]] = {t: [] for t in grid}
    for row in rows:
        x = work(row, profile)
        bins[max(t for t in grid if t <= x)].append((ideal_seconds(row, profile), busy_seconds(row, floor_us), row.count))

    def pooled(items: list[tuple[float, float, int]]) -> float:
        return min(1.0, sum(i * n for i, _, n in items) / sum(b * n for _, b, n in items))

    filled_at = [t for t in grid if bins[t]]
    if not filled_at:
        raise ValueError("no kernels to fit")
    smooth = monotone([pooled(bins[t]) for t in filled_at], [sum(n for _, _, n in bins[t]) for t in filled_at])
    filled = {t: sig(v) for t, v in zip(filled_at, smooth)}
    values = []
    for t in grid:
        lower = [u for u in filled if u <= t]
        values.append(filled[max(lower)] if lower else filled[min(filled)])
    return step_table(grid, values)


def step_table(grid: Sequence[int], values: Sequence[float]) -> EfficiencyTable:
    """The table with `values` at the `grid` thresholds, equal neighbours merged."""
    rows_out: list[tuple[float, float]] = []
    for t, v in sorted(zip(grid, values), reverse=True):
        if rows_out and rows_out[-1][1] == v:
            rows_out[-1] = (float(t), v)            # the same value continues to a smaller threshold
        else:
            rows_out.append((float(t), v))
    return EfficiencyTable(tuple(rows_out))


def table_rows(rows: Sequence[Row], blocks: bool = True) -> dict[str, list[Row]]:
    """The kernels each table is fitted on: per Cube and Vector class its aligned kernels, and `memory`
    (every aligned Vector kernel). `blocks=False` (a CPU): every kernel counts as aligned."""
    usable = [r for r in rows if r.op_type not in OPAQUE]
    aligned = [r for r in usable if r.gemm is not None or r.aligned or not blocks]
    out = {kind: [r for r in aligned if r.kernel_class == kind] for kind in (*CUBE_CLASSES, *VECTOR_CLASSES)}
    out["memory"] = [r for r in aligned if r.gemm is None]
    return out


def unaligned_rows(rows: Sequence[Row], kind: str) -> list[Row]:
    """The Vector kernels of class `kind` whose innermost dimension is not whole 32-byte blocks."""
    return [r for r in rows if r.op_type not in OPAQUE and r.gemm is None and not r.aligned and r.kernel_class == kind]


def fit_classes(rows: Sequence[Row], profile: HardwareProfile, blocks: bool = True,
                fallback: KernelClasses | None = None) -> KernelClasses:
    """The tables from the aligned kernels; then, per Vector class, the unaligned kernels' summed
    time over what the aligned tables predict for them (the slowdown factor, at least 1). `blocks=False`
    (a CPU, which has no 32-byte block unit): every kernel counts as aligned and the factors stay 1.
    `fallback`: the table (and unaligned factor) of a class without kernels to fit is taken from it; without
    one such a class is an error."""
    usable = [r for r in rows if r.op_type not in OPAQUE]
    floor = sig(weighted_median([(r.duration_us, r.count) for r in usable if r.nbytes <= FLOOR_BYTES]))
    tables = {}
    for kind, mine in table_rows(rows, blocks).items():
        if not mine and fallback is not None:
            tables[kind] = fallback.table(kind)
            continue
        tables[kind] = fit_table(mine, profile, TILE_GRID if kind in CUBE_CLASSES else BYTES_GRID, floor)
    factors = {f"unaligned_{kind}": 1.0 for kind in VECTOR_CLASSES}
    draft = dataclasses.replace(profile, kernel_classes=KernelClasses(min_kernel_us=floor, **factors, **tables))
    for kind in VECTOR_CLASSES if blocks else ():
        slow = unaligned_rows(usable, kind)
        predicted = sum(r.count * (predicted_seconds(r, draft) - floor * 1e-6) for r in slow)
        if slow and predicted > 0:
            factors[f"unaligned_{kind}"] = sig(max(1.0, sum(r.count * busy_seconds(r, floor) for r in slow) / predicted))
        elif fallback is not None:
            factors[f"unaligned_{kind}"] = fallback.unaligned(kind)
    return KernelClasses(min_kernel_us=floor, **factors, **tables)


def predicted_seconds(row: Row, profile: HardwareProfile) -> float:
    """The model's time for a profiled kernel: its op type's line where the profile has one (see
    fit_op_costs), else hardware.model.compute's roofline with class tables."""
    line = profile.kernel_classes.op_cost(row.op_type, row.dtype) if profile.kernel_classes else None
    if line is not None:
        return line_seconds(line, row)
    kind = row.kernel_class
    if row.gemm is not None:
        eff = profile.kernel_classes.table(kind).at(work(row, profile))   # type: ignore[union-attr]
        compute = cube_flops(row, profile) / (matrix_tflops(row.dtype, profile) * 1e12 * eff)
    else:
        elements = vector_work_elements((*row.inputs, *row.outputs))
        compute = row.flops / (vector_tflops(row.dtype, profile) * 1e12 * profile.vector.efficiency.at(elements))
    classes = profile.kernel_classes
    slowdown = 1.0 if row.gemm is not None or row.aligned or classes is None else classes.unaligned(kind)
    return floor_seconds(profile) + max(compute, memory_seconds(row.nbytes, profile, kind) * slowdown)


MIN_LINE_SHAPES = 3       # distinct profiled shapes an op type needs for a line of its own (3 coefficients)


def line_features(row: Row) -> tuple[float, float, float]:
    """(1, MB moved, GFLOP) of a profiled kernel: the terms of an OpCost line (compute.op_line_kernel)."""
    return (1.0, row.nbytes / 1e6, row.flops / 1e9)


def line_seconds(line: OpCost, row: Row) -> float:
    _, mb, gflop = line_features(row)
    return (line.fixed_us + line.us_per_mb * mb + line.us_per_gflop * gflop) * 1e-6


def min_us_per_mb(profile: HardwareProfile) -> float:
    """The fastest a kernel can move bytes: every core streaming at the L2 rate (profile.memory.l2_gbps is
    one core's), in microseconds per MB. A fitted slope below it would be a kernel beating the cache."""
    return 1e3 / (profile.memory.l2_gbps * profile.vector.cores)


def min_us_per_gflop(profile: HardwareProfile, dtype: str) -> float:
    """The fastest a GEMM can do its FLOPs: the Cube's datasheet peak for its dtype, in microseconds per GFLOP,
    rounded up to 3 digits (so the written line never beats the peak)."""
    tflops = profile.cube.tflops_fp16 if dtype == "fp16" else profile.cube.tflops_fp32
    exact = 1e6 / (tflops * 1e3)
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)
    return sig(math.ceil(exact / step) * step)


def fit_op_costs(rows: Sequence[Row], profile: HardwareProfile) -> tuple[OpCost, ...]:
    """One line per (op type, dtype) with at least MIN_LINE_SHAPES distinct shapes among `rows`: least
    squares of the relative error (each row weighted by sqrt(count) / its time, so that a 4 us kernel
    counts as much as a 4 ms one), coefficients >= 0 and the bytes slope at least min_us_per_mb (without
    it the many fixed-cost-bound small kernels let a line pass below the large ones) and a GEMM's FLOPs
    slope at least the datasheet peak's (min_us_per_gflop: a steeper-than-peak slope, traded against a
    large bytes slope, fits the rows but predicts a larger GEMM faster than the chip can run it), to 3 digits."""
    import numpy as np
    from scipy.optimize import lsq_linear

    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.op_type not in OPAQUE:
            groups.setdefault((r.op_type, r.dtype), []).append(r)
    lines = []
    for (op_type, dtype), mine in sorted(groups.items()):
        shapes = sorted({(r.nbytes, r.flops) for r in mine})
        if len(shapes) < MIN_LINE_SHAPES:
            continue
        terms = line_terms(shapes)
        gemm_floor = min_us_per_gflop(profile, dtype) if mine[0].gemm is not None else 0.0
        lower = np.array([0.0, min_us_per_mb(profile), gemm_floor])[terms]
        weights = np.array([r.count ** 0.5 / r.duration_us for r in mine])
        a = np.array([line_features(r) for r in mine])[:, terms] * weights[:, None]
        fit = lsq_linear(a, np.array([r.duration_us for r in mine]) * weights, bounds=(lower, np.inf), method="bvls")
        coef = [0.0, 0.0, 0.0]
        for term, value in zip(terms, fit.x):
            coef[term] = sig(float(value))
        per_mb = max(coef[1], sig(min_us_per_mb(profile)))
        per_gflop = max(coef[2], sig(gemm_floor)) if 2 in terms else coef[2]
        lines.append(OpCost(op_type=op_type, dtype=dtype, fixed_us=coef[0], us_per_mb=per_mb, us_per_gflop=per_gflop,
                            rows=len(shapes)))
    return tuple(lines)


def line_terms(shapes: Sequence[tuple[int, int]]) -> list[int]:
    """The terms of line_features an op type's shapes can tell apart: all three, unless its (bytes, FLOPs)
    points lie on one line (a unary Vector op's FLOPs, one per output element, are proportional to its
    bytes), where bytes alone (or FLOPs, if the bytes never change) stand for both. Exact integer test,
    so the fit has one solution and gives the same digits on every machine."""
    (b0, f0), (b1, f1) = shapes[0], shapes[1]
    collinear = all((b - b0) * (f1 - f0) == (f - f0) * (b1 - b0) for b, f in shapes[2:])
    if not collinear:
        return [0, 1, 2]
    return [0, 1] if any(b != b0 for b, _ in shapes) else [0, 2]


def op_costs_text(costs: Sequence[OpCost]) -> list[str]:
    rows = [f'  {{op_type = "{c.op_type}", dtype = "{c.dtype}", fixed_us = {c.fixed_us:g}, us_per_mb = '
            f'{c.us_per_mb:g}, us_per_gflop = {c.us_per_gflop:g}, rows = {c.rows}}},' for c in costs]
    return ["op_costs = [", *rows, "]"]
