"""Convert the Profiler folders of a profiled validation run on this CPU into a per-op table.

    python -m hardware.calibration.cpu_ops RUN.jsonl --profile cpu-icelake

RUN.jsonl is `matrices/validation.toml` run on `mindspore:cpu` with MindSpore's Profiler on (the matrix
key `profile = true`), so `RUN.profiles/<cell id>/` holds one Profiler folder per measured process. The
CPU backend writes, per kernel instance, its full name and each profiled step's start and duration
(FRAMEWORK/cpu_op_execute_timestamp_<rank>.csv-like text: `name;HostCpuOps;start_ns,dur_ms,tid ...`).
Each instance is joined to the op of the cell's extracted graph (hardware.model.inputs.plan_graph) with the
same scope and type, in execution order, which gives it the shapes, dtypes and the GEMM the device model
costs it by (compute.gemm_shape). Its time is the median over the processes of its mean over the profiled
steps: a process that a neighbour's burst slowed does not move it.

Only kernel-by-kernel graph-mode cells are read (graph-kernel fusion launches AKG kernels with no graph op
to join; PyNative times each op with its dispatch). Identical kernels of one cell (same type and
tensors) are one row with their count and median duration, as in data/an2022_ascend910_ops.csv, and the
row's `network` is the cell: `<workload>[@<overrides>] <label>`, so `derive` can tell the `fit` cells
(tiny presets as shipped) from the `validate` ones. The output is data/cpu_<cpu>_ops.csv, the profile's.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from hardware.calibration.derive import datasheet
from hardware.calibration.table import CPU_TABLES, ops_table
from hardware.model.compute import gemm_shape
from hardware.model.inputs import plan_graph
from hardware.model.lowering import lower
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.plan import resolve
from hardware.model.profile import PROFILE_DIR
from msbench.records import Record
from msbench.store import RunStore

FIELDS = ("network", "batch", "op_type", "count", "duration_us", "inputs", "outputs", "gemm")
DTYPES = {"Float32": "fp32", "Float16": "fp16", "BFloat16": "bf16", "Float64": "fp64", "Int8": "int8",
          "Int16": "int16", "Int32": "int32", "Int64": "int64", "UInt8": "uint8", "Bool": "bool"}


@dataclass(frozen=True)
class Instance:
    """One kernel instance of a profiled step: its full name, first start (ns) and mean duration (us)."""

    name: str
    start_ns: int
    duration_us: float

    @property
    def scope(self) -> str:
        return self.name.rsplit("/", 1)[0] if "/" in self.name else ""

    @property
    def op_type(self) -> str:
        return self.name.rsplit("/", 1)[-1].rsplit("-op", 1)[0]


def read_timestamps(path: Path) -> list[Instance]:
    """`name;HostCpuOps;start_ns,duration_ms,thread start_ns,duration_ms,thread ...` per line."""
    out = []
    for line in path.read_text().splitlines():
        parts = line.strip().split(";")
        if len(parts) < 3 or not parts[2].strip():
            continue
        calls = [c.split(",") for c in parts[2].split()]
        out.append(Instance(parts[0], int(calls[0][0]), 1e3 * statistics.fmean(float(c[1]) for c in calls)))
    return out


def process_instances(cell_dir: Path) -> list[list[Instance]]:
    """Each measured process's instances (its Profiler folder), in a stable order."""
    folders = sorted(cell_dir.glob("*/FRAMEWORK/cpu_op_execute_timestamp_*.txt"))
    return [read_timestamps(f) for f in folders]


def median_instances(processes: Sequence[Sequence[Instance]]) -> list[Instance]:
    """One instance per name: the first process's start (the execution order), the median duration."""
    durations: dict[str, list[float]] = defaultdict(list)
    for instances in processes:
        for i in instances:
            durations[i.name].append(i.duration_us)
    first = processes[0] if processes else []
    return [Instance(i.name, i.start_ns, statistics.median(durations[i.name])) for i in first]


def join(ops: Sequence[Op], instances: Sequence[Instance]) -> tuple[list[tuple[Op, Instance]], int, int]:
    """(graph op, measured instance) pairs by scope and type, each side in execution order; and the
    counts left unjoined on each side (a group whose sizes differ is left out whole)."""
    graph: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in ops:
        graph[(op.scope, op.type)].append(op)
    measured: dict[tuple[str, str], list[Instance]] = defaultdict(list)
    for i in sorted(instances, key=lambda i: (i.start_ns, i.name)):
        measured[(i.scope, i.op_type)].append(i)
    pairs: list[tuple[Op, Instance]] = []
    for key, mine in measured.items():
        if len(graph.get(key, ())) == len(mine):
            pairs += list(zip(graph[key], mine))
    joined = {id(i) for _, i in pairs}
    left_graph = len(ops) - len(pairs)
    left_measured = sum(1 for i in instances if id(i) not in joined)
    return pairs, left_graph, left_measured


def tensor_text(spec: TensorSpec) -> str:
    return f"{DTYPES.get(spec.dtype, spec.dtype.lower())}:ND:{'x'.join(str(d) for d in spec.shape) or '1'}"


def rows_of(network: str, batch: int, pairs: Iterable[tuple[Op, Instance]]) -> list[dict[str, str]]:
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for op, inst in pairs:
        gemm = "x".join(str(d) for d in gemm_shape(op)) if op.unit == "cube" else ""
        key = (op.type, ";".join(map(tensor_text, op.inputs)), ";".join(map(tensor_text, op.outputs)), gemm)
        groups[key].append(inst.duration_us)
    return [{"network": network, "batch": str(batch), "op_type": t, "count": str(len(d)),
             "duration_us": f"{statistics.median(d):.4g}", "inputs": ins, "outputs": outs, "gemm": gemm}
            for (t, ins, outs, gemm), d in sorted(groups.items())]


def readable(record: Record) -> bool:
    s = record.cell.settings
    return (record.status == "ok" and s.mode == "graph" and not s.graph_kernel and s.devices == 1
            and record.cell.scenario == "train")


def cell_name(record: Record) -> str:
    c = record.cell
    overrides = ",".join(f"{k}={v}" for k, v in sorted(c.overrides.items()))
    return f"{c.workload}{'@' + overrides if overrides else ''} {c.label}"


def convert(run: Path, profile_name: str, folders: Path) -> tuple[list[dict[str, str]], list[str]]:
    """The rows of every readable cell of `run` whose Profiler folders are under `folders`."""
    profile = datasheet(PROFILE_DIR / f"{profile_name}.toml")   # its [kernel_classes] are derived from this table
    rows: list[dict[str, str]] = []
    lines = []
    for record in RunStore(run).load():
        cell_dir = folders / record.cell.id
        if not readable(record) or not cell_dir.is_dir():
            continue
        c = record.cell
        graph = plan_graph(resolve(c, profile))
        ops = lower(graph, c.settings, profile).ops
        processes = process_instances(cell_dir)
        pairs, left_graph, left_measured = join(ops, median_instances(processes))
        rows += rows_of(cell_name(record), graph.batch_size, pairs)
        lines.append(f"{cell_name(record)}: {len(processes)} processes, {len(pairs)} kernels joined; "
                     f"unjoined: {left_graph} graph ops, {left_measured} profiled instances")
    return rows, lines


def write(rows: Sequence[dict[str, str]], out: Path, header: Sequence[str]) -> None:
    with open(out, "w", newline="") as fh:
        for line in header:
            fh.write(f"# {line}\n")
        writer = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware.calibration.cpu_ops")
    parser.add_argument("run", type=Path, help="a profiled run of matrices/validation.toml (or cpu_kernels.toml) "
                        "on mindspore:cpu")
    parser.add_argument("--of", choices=CPU_TABLES, default="fit-run",
                        help="which of the profile's per-op tables the run fills: the dispatch fit run's "
                        "(matrices/validation.toml) or the kernel sweep's (matrices/cpu_kernels.toml)")
    parser.add_argument("--profile", required=True, help="the cpu-kind profile whose per-op table this is")
    parser.add_argument("--profiles", type=Path, help="the run's Profiler folders (default: RUN.profiles beside it)")
    parser.add_argument("--source", default="", help="where the run comes from (commit, date, conditions)")
    args = parser.parse_args(argv)
    rows, lines = convert(args.run, args.profile, args.profiles or args.run.with_suffix(".profiles"))
    if not rows:
        print(f"cpu_ops: error: no profiled graph-mode cells in {args.run}", file=sys.stderr)
        return 2
    out = ops_table(args.profile, args.of)
    write(rows, out, [f"source: MindSpore 2.10 CPU Profiler over {args.run.name} ({args.source or 'see the profile header'})",
                      "converted by: python -m hardware.calibration.cpu_ops; duration_us = median over the measured "
                      "processes of each kernel's mean over the profiled steps, then the median of `count` identical kernels",
                      "tensors are dtype:format:shape from the cell's extracted graph; gemm = BxMxNxK (compute.gemm_shape)",
                      *lines])
    print("\n".join(lines))
    print(f"wrote {out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
