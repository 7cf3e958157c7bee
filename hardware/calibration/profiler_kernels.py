"""The launched kernels of an Ascend profiler output: one record per kernel, with the features derive costs it by.

Two layouts, each read by its documented column names:

- MindSpore's Profiler (2.x): `ASCEND_PROFILER_OUTPUT/kernel_details.csv`, msprof's op_summary with columns
  renamed by mindspore/profiler/analysis/viewer/ascend_kernel_details_viewer.py (Name, Type, Accelerator Core,
  Duration(us), and an optional Step Id or Step ID), as CANN's "kernel_details.csv" page describes
  (https://www.hiascend.com/document/detail/en/canncommercial/850/devaids/profiling/atlasprofiling_16_1149.html).
- msprof's own `op_summary_*.csv` (Op Name, OP Type, Task Type, Task Duration(us)), CANN's "op_summary" page
  (https://hiascend.com/document/detail/zh/canncommercial/601/devtools/auxiliarydevtool/atlasprofiling_16_0144.html).

Both carry Block Dim (Block Num in later CANN releases) and the tensors: Input/Output Shapes (`;` between
tensors, `,` between dimensions, empty for a scalar), Data Types (FLOAT16, FLOAT, ...) and Formats (NC1HWC0,
FRACTAL_Z, ND, ...). Only AI Core and AI Vector Core kernels are kept (what the per-class tables cost); AI CPU,
communication and copy tasks are counted and left out. Tensors become the per-op table's `dtype:format:shape`
text (hardware/calibration/table.py), so a profiler output and the An et al. table are one kind of row.
"""

from __future__ import annotations

import csv
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from msbench.errors import UserError

# The profiler's data type names -> the table's (table.DTYPE_BYTES); the first name of each is the one written.
DTYPES = {"FLOAT": "fp32", "FLOAT32": "fp32", "DT_FLOAT": "fp32", "FLOAT16": "fp16", "DT_FLOAT16": "fp16",
          "BF16": "bf16", "BFLOAT16": "bf16", "DT_BF16": "bf16", "DOUBLE": "fp64", "FLOAT64": "fp64",
          "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "UINT8": "uint8",
          "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64", "BOOL": "bool", "DT_BOOL": "bool"}
WRITTEN = {table: name for name, table in reversed(list(DTYPES.items()))}
AI_CORES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
# column of each field in (kernel_details.csv, op_summary_*.csv); a tuple lists accepted spellings
COLUMNS = {
    "name": (("Name",), ("Op Name",)),
    "type": (("Type",), ("OP Type",)),
    "core": (("Accelerator Core",), ("Task Type",)),
    "duration": (("Duration(us)",), ("Task Duration(us)",)),
    "block_dim": (("Block Dim", "Block Num"), ("Block Dim", "Block Num")),
    "in_shapes": (("Input Shapes",), ("Input Shapes",)),
    "in_dtypes": (("Input Data Types",), ("Input Data Types",)),
    "in_formats": (("Input Formats",), ("Input Formats",)),
    "out_shapes": (("Output Shapes",), ("Output Shapes",)),
    "out_dtypes": (("Output Data Types",), ("Output Data Types",)),
    "out_formats": (("Output Formats",), ("Output Formats",)),
}
KERNEL_DETAILS = "kernel_details.csv"
HEADER = ("Step Id", "Name", "Type", "Accelerator Core", "Duration(us)", "Block Dim", "Input Shapes",
          "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats")


@dataclass(frozen=True)
class Kernel:
    """One launched AI Core kernel: its type, block dim, tensors as table text and duration."""

    name: str
    op_type: str
    core: str
    block_dim: int
    inputs: str           # table.parse_tensors text: dtype:format:d0xd1;...
    outputs: str
    duration_us: float
    step: str             # the Step Id column ("" where the file has none)


@dataclass(frozen=True)
class ProfilerFile:
    """The kernels of one profiler output, where they came from, and what was left out."""

    path: Path
    layout: str                      # kernel_details | op_summary
    sha256: str
    kernels: tuple[Kernel, ...]
    skipped: dict[str, int]          # accelerator core -> tasks left out (not AI Core kernels)

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(sorted({k.step for k in self.kernels if k.step}, key=step_order))


def step_order(step: str) -> tuple[int, str]:
    return (int(step), step) if step.isdigit() else (1 << 30, step)


def find_file(folder: Path) -> tuple[Path, str]:
    """The one kernel table under `folder` (the folder itself may be the file): kernel_details.csv first,
    else msprof's op_summary_*.csv."""
    if folder.is_file():
        return folder, "op_summary" if folder.name.startswith("op_summary") else "kernel_details"
    if not folder.is_dir():
        raise UserError(f"--profiler {folder}: no such folder or file")
    for pattern, layout in ((KERNEL_DETAILS, "kernel_details"), ("op_summary_*.csv", "op_summary")):
        found = sorted(folder.rglob(pattern))
        if len(found) > 1:
            raise UserError(f"--profiler {folder}: {len(found)} {pattern} files under it ({', '.join(map(str, found[:4]))}"
                            f"{', ...' if len(found) > 4 else ''}); name one rank's folder or file")
        if found:
            return found[0], layout
    raise UserError(f"--profiler {folder}: no ASCEND_PROFILER_OUTPUT/{KERNEL_DETAILS} or op_summary_*.csv under it; "
                    "allowed: a MindSpore Profiler output folder (or its kernel_details.csv) or an msprof output")


def read_profiler(folder: Path) -> ProfilerFile:
    path, layout = find_file(folder)
    data = path.read_bytes()
    reader = csv.DictReader(data.decode("utf-8-sig").splitlines())
    columns = {field: column(reader.fieldnames or [], names[layout == "op_summary"], path)
               for field, names in COLUMNS.items()}
    kernels, skipped = [], {}
    for line, row in enumerate(reader, start=2):
        core = row[columns["core"]].strip()
        if core not in AI_CORES:
            skipped[core] = skipped.get(core, 0) + 1
            continue
        kernels.append(Kernel(
            name=row[columns["name"]].strip(), op_type=row[columns["type"]].strip(), core=core,
            block_dim=int(number(row, columns["block_dim"], path, line)),
            inputs=tensors_text(row, columns, "in", path, line), outputs=tensors_text(row, columns, "out", path, line),
            duration_us=number(row, columns["duration"], path, line), step=(row.get("Step Id") or row.get("Step ID") or "").strip()))
    if not kernels:
        raise UserError(f"{path}: no AI Core kernels (Accelerator Core / Task Type in {', '.join(AI_CORES)}); "
                        f"found only {', '.join(f'{n} {c}' for c, n in sorted(skipped.items())) or 'no rows'}")
    return ProfilerFile(path, layout, hashlib.sha256(data).hexdigest(), tuple(kernels), skipped)


def column(fieldnames: Sequence[str], names: tuple[str, ...], path: Path) -> str:
    stripped = {f.strip(): f for f in fieldnames if f}
    for name in names:
        if name in stripped:
            return stripped[name]
    raise UserError(f"{path}: no column {' or '.join(repr(n) for n in names)}; columns: {', '.join(stripped)}")


def number(row: dict[str, str], col: str, path: Path, line: int) -> float:
    value = (row.get(col) or "").strip()
    try:
        return float(value)
    except ValueError:
        raise UserError(f"{path} line {line}: column {col!r} holds {value!r}; allowed: a number") from None


def tensors_text(row: dict[str, str], columns: dict[str, str], side: str, path: Path, line: int) -> str:
    """`dtype:format:shape;...` of one side's tensors (a scalar's empty shape is `1`)."""
    try:
        return tensor_columns_text(row[columns[f"{side}_shapes"]], row[columns[f"{side}_dtypes"]],
                                   row[columns[f"{side}_formats"]])
    except ValueError as exc:
        raise UserError(f"{path} line {line}: {side}put {exc}") from None


@functools.lru_cache(maxsize=65536)
def tensor_columns_text(shapes_text: str, dtypes_text: str, formats_text: str) -> str:
    """The table text of one side's Shapes, Data Types and Formats columns (a step repeats them: cached)."""
    dtypes, formats = split(dtypes_text), split(formats_text)
    shapes = split(shapes_text) or [""] * len(dtypes)      # one scalar: an empty column
    if not (len(shapes) == len(dtypes) == len(formats)):
        raise ValueError(f"{len(shapes)} shapes, {len(dtypes)} data types and {len(formats)} formats; "
                         "allowed: one of each per tensor")
    out = []
    for shape, dtype, fmt in zip(shapes, dtypes, formats):
        if dtype.upper() not in DTYPES:
            raise ValueError(f"data type {dtype!r}; allowed: {', '.join(DTYPES)}")
        dims = "x".join(d.strip() for d in shape.split(",") if d.strip()) or "1"
        out.append(f"{DTYPES[dtype.upper()]}:{fmt}:{dims}")
    return ";".join(out)


def split(text: str | None) -> list[str]:
    """The `;`-separated entries of a tensor column ("" or N/A: none; "; ;" holds two scalars' empty shapes)."""
    text = (text or "").strip().strip('"')
    if text in ("", "N/A"):
        return []
    return [t.strip() for t in text.split(";")]


# --- writing the layout: the An et al. runs as a MindSpore Profiler output (tests, hardware.calibration.an2022_profiler)
def write_kernel_details(path: Path, kernels: Iterable[Kernel]) -> None:
    """`kernels` as MindSpore's ASCEND_PROFILER_OUTPUT/kernel_details.csv (the columns read above)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(HEADER)
        for k in kernels:
            ins, outs = columns_of(k.inputs), columns_of(k.outputs)
            writer.writerow([k.step, k.name, k.op_type, k.core, repr(k.duration_us), k.block_dim, *ins, *outs])


@functools.lru_cache(maxsize=65536)
def columns_of(text: str) -> tuple[str, str, str]:
    """(Shapes, Data Types, Formats) columns of table tensor text."""
    items = [t.split(":") for t in text.split(";") if t]
    return (";".join(s.replace("x", ",") for _, _, s in items), ";".join(WRITTEN[d] for d, _, _ in items),
            ";".join(f for _, f, _ in items))
