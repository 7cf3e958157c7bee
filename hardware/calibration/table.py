"""The checked-in per-op table (data/an2022_ascend910_ops.csv): its rows, their GEMMs and dtypes.

Each row is one profiled AI-Core kernel of an Ascend 910 training step (or `count` identical ones)
with the Ascend-format tensors it read and wrote; `Row.gemm` recovers the GEMM a Cube kernel ran
from those shapes (NC1HWC0 activations, FracZ weights, FRACTAL_NZ matrices). The dtypes the
profiler wrote are checked against the HBM peak per network before any bytes are used.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from hardware.model.compute import cost_work
from hardware.model.opclass import CUBE_CLASSES, gemm_class, op_class
from hardware.model.profile import HardwareProfile
from msbench.resources import suite_path

DATA = suite_path("hardware/calibration/data/an2022_ascend910_ops.csv")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1,
               "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
FIELDS = ("network", "batch", "op_type", "block_dim", "count", "duration_us", "inputs", "outputs")
SWAPPED = {"fp16": "fp32", "fp32": "fp16"}
BLOCK_FORMATS = ("NC1HWC0", "FracZ", "FRACTAL_Z", "FRACTAL_NZ")
OPAQUE = ("AtomicAddrClean",)       # its op_info names the buffer it guards, not what it writes


CPU_TABLES = ("fit-run", "sweep")   # a cpu profile's per-op tables: the dispatch fit's run, the kernel sweep


def ops_table(profile: str, of: str = "fit-run") -> Path:
    """A cpu-kind profile's per-op table, measured on its CPU (hardware.calibration.cpu_ops writes it):
    of the validation run (matrices/validation.toml), or of the kernel sweep (matrices/cpu_kernels.toml)."""
    if of not in CPU_TABLES:
        raise ValueError(f"per-op table of {of!r}: expected one of {CPU_TABLES}")
    stem = profile.replace('-', '_')
    return DATA.parent / (f"{stem}_ops.csv" if of == "fit-run" else f"{stem}_sweep_ops.csv")


@dataclass(frozen=True)
class Tensor:
    dtype: str
    format: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class Row:
    """One profiled kernel (or `count` identical ones) with the features the model costs it by."""

    network: str
    batch: int
    op_type: str
    count: int
    duration_us: float
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    # (batch, M, N, K) as the device model reads it from the graph (compute.gemm_shape), for rows whose
    # tensors are not in Ascend's formats (the CPU's, data/cpu_*_ops.csv); None: from the shapes below
    gemm_dims: tuple[int, int, int, int] | None = None

    @property
    def kernel_class(self) -> str:
        g = self.gemm
        kind = op_class(self.op_type, "cube" if g else "vector")
        return gemm_class(kind, *g[1:]) if g is not None else kind

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (*self.inputs, *self.outputs))

    @property
    def aligned(self) -> bool:
        """Whether the largest tensor's innermost dimension is whole 32-byte blocks (the Ascend
        fractal formats always are: their innermost axis is a 16-element block)."""
        tensors = (*self.inputs, *self.outputs)
        if not tensors:
            return True
        big = max(tensors, key=lambda t: t.nbytes)
        if big.format in BLOCK_FORMATS:
            return True
        return (big.shape[-1] * DTYPE_BYTES[big.dtype]) % 32 == 0

    @property
    def dtype(self) -> str:
        return next((t.dtype for t in self.inputs if t.dtype in ("fp16", "bf16", "fp32")), "fp32")

    @property
    def gemm(self) -> tuple[int, int, int, int] | None:
        """(batch, M, N, K) of the kernel's GEMM from its Ascend-format shapes; None for a Vector op."""
        if self.gemm_dims is not None:
            return self.gemm_dims
        kind = op_class(self.op_type)
        if kind not in CUBE_CLASSES or not self.outputs:
            return None
        out = self.outputs[0].shape
        frac_z = next((t.shape for t in self.inputs if t.format in ("FracZ", "FRACTAL_Z")), None)
        five_d = [t.shape for t in self.inputs if t.format == "NC1HWC0"]
        if kind == "conv_forward" and frac_z and len(out) == 5:
            return (1, out[0] * out[2] * out[3], out[1] * 16, frac_z[0] * 16)
        if kind == "conv_input_grad" and frac_z and five_d and len(out) == 5:
            dy = five_d[0]                  # a stride-1 conv of the dilated dy: K = Cout·kh·kw at every dx pixel
            kernel_area = max(frac_z[0] // out[1], 1)
            return (1, out[0] * out[2] * out[3], out[1] * 16, dy[1] * 16 * kernel_area)
        if kind == "conv_filter_grad" and five_d and len(out) == 4:
            dy = next((s for s in five_d if s[1] == out[1]), five_d[0])
            return (1, out[0] * 16, out[1] * 16, dy[0] * dy[2] * dy[3])
        if kind in ("matmul", "batch_matmul") and self.inputs:
            nz = self.outputs[0].format == "FRACTAL_NZ"
            batch = math.prod(out[:-4]) if nz else math.prod(out[:-2])
            m, n = (out[-3] * 16, out[-4] * 16) if nz else (out[-2], out[-1])
            return (batch, m, n, max(self.inputs[0].elements // (batch * m), 1))
        return None

    @property
    def flops(self) -> int:
        return cost_work(self.gemm, self.outputs[0].elements if self.outputs else 0)


def parse_tensors(text: str) -> tuple[Tensor, ...]:
    out = []
    for item in filter(None, text.split(";")):
        dtype, fmt, shape = item.split(":")
        out.append(Tensor(dtype, fmt, tuple(int(d) for d in shape.split("x"))))
    return tuple(out)


def load_rows(path: Path = DATA) -> list[Row]:
    with open(path, newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    return [row_from_fields(r) for r in csv.DictReader(lines)]


def row_from_fields(r: dict[str, str]) -> Row:
    """One table row from its CSV fields (FIELDS, and the optional `gemm`)."""
    return Row(network=r["network"], batch=int(r["batch"]), op_type=r["op_type"], count=int(r["count"]),
               duration_us=float(r["duration_us"]), inputs=parse_tensors(r["inputs"]),
               outputs=parse_tensors(r["outputs"]), gemm_dims=parse_gemm(r.get("gemm") or ""))


def group_kernels(network: str, batch: int, kernels: Iterable[tuple[str, int, str, str, float]]) -> list[dict[str, Any]]:
    """Table fields of one run's kernels, each (op type, block dim, inputs text, outputs text, µs): identical
    kernels (same type, block dim and tensors) merged into one row with their count and median duration,
    which keeps the table small without losing a distinct shape."""
    groups: dict[tuple[str, int, str, str], list[float]] = {}
    for op_type, block_dim, ins, outs, duration_us in kernels:
        groups.setdefault((op_type, block_dim, ins, outs), []).append(duration_us)
    return [{"network": network, "batch": batch, "op_type": t, "block_dim": b, "count": len(d),
             "duration_us": f"{statistics.median(d):.4f}", "inputs": i, "outputs": o}
            for (t, b, i, o), d in sorted(groups.items())]


def parse_gemm(text: str) -> tuple[int, int, int, int] | None:
    """`BxMxNxK` (the optional `gemm` column), or None where it is empty or absent."""
    if not text:
        return None
    batch, m, n, k = (int(d) for d in text.split("x"))
    return (batch, m, n, k)


def too_big_for_l2(row: Row, profile: HardwareProfile) -> bool:
    return row.nbytes > 2 * profile.memory.l2_mib * 2**20


def over_peak(rows: Sequence[Row], profile: HardwareProfile) -> int:
    """Kernels too big for L2 (> 2 x L2 moved) that would stream faster than the HBM peak."""
    big = [r for r in rows if r.gemm is None and r.op_type not in OPAQUE and too_big_for_l2(r, profile)]
    return sum(r.nbytes / (r.duration_us * 1e-6) > profile.memory.gbps * 1e9 for r in big)


def swap_floats(row: Row) -> Row:
    def swap(ts: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return tuple(dataclasses.replace(t, dtype=SWAPPED.get(t.dtype, t.dtype)) for t in ts)
    return dataclasses.replace(row, inputs=swap(row.inputs), outputs=swap(row.outputs))


def halve_impossible_fp32(row: Row, profile: HardwareProfile) -> Row:
    """A kernel too big for L2 whose fp32 premise would beat the HBM peak ran on fp16 tensors."""
    if row.gemm is None and too_big_for_l2(row, profile) and row.nbytes / (row.duration_us * 1e-6) > profile.memory.gbps * 1e9:
        def half(ts: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
            return tuple(dataclasses.replace(t, dtype="fp16") if t.dtype == "fp32" else t for t in ts)
        return dataclasses.replace(row, inputs=half(row.inputs), outputs=half(row.outputs))
    return row


def read_dtypes(rows: Sequence[Row], profile: HardwareProfile) -> tuple[list[Row], list[str]]:
    """Per network (its runs share one recipe), the dtype reading the HBM peak allows: as labelled,
    or fp16 and fp32 swapped (the profiler's labels are one step off in some runs). The swap is taken
    only where it removes at least half of the large kernels that beat the HBM peak as labelled: a
    near-tie (BERT: about 50 either way) says neither reading fits every kernel, so the labels stand
    and `halve_impossible_fp32` mends the kernels they cannot explain. The counts are printed."""
    out: list[Row] = []
    lines = []
    for network in sorted({r.network.split("-")[0] for r in rows}):
        mine = [r for r in rows if r.network.split("-")[0] == network]
        swapped = [swap_floats(r) for r in mine]
        as_is, other = over_peak(mine, profile), over_peak(swapped, profile)
        use_swap = 2 * other <= as_is and other < as_is
        out += [halve_impossible_fp32(r, profile) for r in (swapped if use_swap else mine)]
        lines.append(f"dtype check {network}: kernels beating the {profile.memory.gbps:g} GB/s HBM peak: "
                     f"{as_is} as labelled, {other} with fp16/fp32 swapped -> {'swapped' if use_swap else 'as labelled'}")
    return out, lines
