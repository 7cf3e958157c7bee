"""Run a matrix's cells on a target, one record each, resumable, shardable, with a progress bar.

Isolated targets (real MindSpore runs) execute each cell in a fresh `python -m msbench.worker`
process with a timeout: a crash, an out-of-memory kill or a hang becomes a record and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from msbench.cell import Cell
from msbench.errors import UserError
from msbench.matrix import Entry, Expansion, load_matrix
from msbench.provenance import capture_provenance
from msbench.records import Metrics, Record
from msbench.repeat import MeasuresInProcesses, run_in_processes
from msbench.settings import parse_assignments
from msbench.stats import paired_delta_pp
from msbench.store import RunStore
from msbench.targets import Target, resolve_target

RECORD_PREFIX = "MSBENCH_RECORD "
OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Out of memory", "out of memory", "Cannot allocate memory")
TAIL_CHARS = 2000


@dataclass
class RunResult:
    path: Path
    records: list[Record]          # records written by this invocation
    skipped: int                   # cells already recorded (resume) or outside the shard


def parse_shard(text: str) -> tuple[int, int]:
    """`"2/4"` -> (2, 4): shard i of N, 1-based."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UserError(f"--shard={text!r} is not allowed; allowed: i/N with 1 <= i <= N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise UserError(f"--shard={text!r} is not allowed; allowed: i/N with 1 <= i <= N, e.g. 2/4")
    return i, n


def in_shard(cell_id: str, shard: tuple[int, int]) -> bool:
    """A deterministic split by id, so it stays the same when other cells come or go."""
    i, n = shard
    return int(cell_id, 16) % n == i - 1


def failure_record(cell: Cell, status: str, reason: str) -> Record:
    return Record(cell=cell, status=status, reason=reason[-TAIL_CHARS:], metrics=Metrics())


def run_inline(cell: Cell, target: Target) -> Record:
    """Run in this process; exceptions become records (the traceback tail is kept as the reason)."""
    try:
        return target.run(cell)
    except MemoryError:
        return failure_record(cell, "oom", "MemoryError\n" + traceback.format_exc())
    except Exception:  # noqa: BLE001 - any failure of a cell is recorded and the run goes on
        return failure_record(cell, "failed", traceback.format_exc())


def run_isolated(cell: Cell, target_name: str, options: Mapping[str, Any], timeout: float) -> Record:
    """Run in a fresh worker process (own session, so a timeout kills its children too)."""
    request = json.dumps({"target": target_name, "options": dict(options), "cell": cell.to_dict()})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.Popen([sys.executable, "-m", "msbench.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(request, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return failure_record(cell, "timeout", f"no result after {timeout:g} s\n{err}")
    lines = [ln for ln in out.splitlines() if ln.startswith(RECORD_PREFIX)]
    if proc.returncode == 0 and lines:
        return Record.from_json_line(lines[-1][len(RECORD_PREFIX):])
    if proc.returncode == -signal.SIGKILL or any(m in err for m in OOM_MARKERS):
        return failure_record(cell, "oom", f"exit code {proc.returncode} (killed or out of memory)\n{err}")
    return failure_record(cell, "failed", f"exit code {proc.returncode}\n{err}")


def run_cell(cell: Cell, *, options: Mapping[str, Any] | None = None, isolate: bool | None = None,
             timeout: float = 1800.0, target: Target | None = None, wait_quiet_s: float = 0.0) -> Record:
    """One cell on its target: unsupported knobs are reported, never measured as if applied."""
    return run_cells([cell], options=options, isolate=isolate, timeout=timeout, target=target,
                     wait_quiet_s=wait_quiet_s)[0]


def run_cells(cells: Sequence[Cell], *, options: Mapping[str, Any] | None = None, isolate: bool | None = None,
              timeout: float = 1800.0, target: Target | None = None, wait_quiet_s: float = 0.0) -> list[Record]:
    """Cells of one target, one record each. On a target that measures in several processes
    (msbench.repeat) the supported cells are measured together, interleaved A, B, A, B ..., which is how
    an A/B pair is compared fairly; `timeout` applies to each process."""
    options = dict(options or {})
    target = target or resolve_target(cells[0].target, **options)
    started = time.time()
    records: dict[int, Record] = {}
    isolated = isolate if isolate is not None else target.isolate
    runnable = []
    for i, cell in enumerate(cells):
        reason = target.supports(cell)
        if reason:
            records[i] = failure_record(cell, "unsupported", reason)
        elif not isolated:
            records[i] = run_inline(cell, target)
        else:
            runnable.append(i)
    if runnable:
        def launch(cell: Cell) -> Record:
            return run_isolated(cell, cell.target, options, timeout)

        chosen = [cells[i] for i in runnable]
        if isinstance(target, MeasuresInProcesses):
            measured = run_in_processes(chosen, target, launch, wait_quiet_s=wait_quiet_s)
        else:
            measured = [launch(cell) for cell in chosen]
        records.update(zip(runnable, measured))
    for record in records.values():
        record.started_at, record.duration_s = started, round(time.time() - started, 3)
    return [records[i] for i in range(len(cells))]


def with_accuracy_delta(record: Record, baseline: Record | None) -> Record:
    """accuracy_delta_pp = accuracy - baseline accuracy in percentage points, when both exist: the mean
    of seed-paired differences (the i-th seed of each), with its 95% t-interval in
    metrics.accuracy_delta_ci95_pp when there are two or more pairs (msbench.stats.paired_delta_pp)."""
    if baseline is None or record.metrics.accuracy is None or baseline.metrics.accuracy is None:
        return record
    values = seed_values(record)
    base_values = seed_values(baseline)
    if len(values) >= 2 and len(values) == len(base_values):
        delta, interval = paired_delta_pp(values, base_values)
        record.metrics.accuracy_delta_pp = round(delta, 6)
        record.metrics.accuracy_delta_ci95_pp = None if interval is None else [round(x, 6) for x in interval]
    else:
        record.metrics.accuracy_delta_pp = round((record.metrics.accuracy - baseline.metrics.accuracy) * 100.0, 6)
    return record


def seed_values(record: Record) -> list[float]:
    """The per-seed accuracies behind metrics.accuracy (empty for a single-run record)."""
    values = (record.metrics.extra.get("accuracy_run") or {}).get("values") or []
    return [float(v) for v in values if v is not None]


def default_run_path(out: Path, matrix_name: str, target: str, shard: tuple[int, int], resume: bool) -> Path:
    stem = f"{matrix_name}-{target.replace(':', '-')}" + (f"-shard{shard[0]}of{shard[1]}" if shard[1] > 1 else "")
    if resume:
        existing = sorted(out.glob(f"{stem}-*.jsonl"))
        if existing:
            return existing[-1]
    return out / f"{stem}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"


def run_matrix(matrix_path: str | Path, *, target: str | None = None, out: str | Path = "results/runs",
               run_id: str | None = None, resume: bool = False, jobs: int | None = None, shard: str = "1/1",
               timeout: float = 1800.0, progress: bool = True, extra: Mapping[str, Any] | None = None,
               wait_quiet_s: float = 0.0) -> RunResult:
    matrix = load_matrix(matrix_path, target=target, extra=extra)
    expansion = matrix.expand()
    shard_ij = parse_shard(shard)
    out = Path(out)
    label = target or "+".join(matrix.targets)
    path = out / f"{run_id}.jsonl" if run_id else default_run_path(out, matrix.name, label, shard_ij, resume)
    store = RunStore(path)
    if path.exists() and not resume:
        raise UserError(f"{path} exists; pass --resume to continue it or choose another --run-id")
    done = {r.cell_id: r for r in store.load(repair=True)} if resume else {}
    todo = [e for e in expansion.entries if e.status != "excluded" and in_shard(e.cell.id, shard_ij)]
    pending = [e for e in todo if e.cell.id not in done]
    pending.sort(key=lambda e: not e.baseline)          # baselines first: their accuracy anchors the deltas
    options: dict[str, Any] = {"accuracy": matrix.accuracy}
    if matrix.accuracy:
        options["accuracy_seeds"] = matrix.accuracy_seeds
    jobs = jobs or default_jobs(matrix.targets, options)
    provenance = capture_provenance()
    run_name = path.stem
    baselines = {r.cell_id: r for r in done.values()}
    written: list[Record] = []

    def execute(entry: Entry) -> Record:
        if entry.status == "invalid":
            record = failure_record(entry.cell, "invalid", entry.reason)
        else:
            record = run_cell(entry.cell, options=options, timeout=timeout, wait_quiet_s=wait_quiet_s)
        base_cell = expansion.baseline_of(entry.cell)
        if not entry.baseline and base_cell is not None:
            with_accuracy_delta(record, baselines.get(base_cell.id))
        elif entry.baseline:
            with_accuracy_delta(record, record)
        record.run_id, record.provenance = run_name, provenance
        store.append(record)
        if entry.baseline:
            baselines[entry.cell.id] = record
        written.append(record)
        return record

    first = [e for e in pending if e.baseline]
    rest = [e for e in pending if not e.baseline]
    with progress_bar(len(todo), len(todo) - len(pending), path, enabled=progress) as advance:
        for batch in (first, rest):
            run_batch(batch, execute, advance, jobs)
    if progress:
        print_summary(expansion, list(done.values()) + written, path)
    return RunResult(path=path, records=written, skipped=len(expansion.entries) - len(pending))


def default_jobs(target_names: Iterable[str], options: Mapping[str, Any]) -> int:
    """Cells at once when `--jobs` is not given: what every target allows (`parallel_cells`; 1 when a
    target does not say, since a measuring target must not share the host with another cell)."""
    return min(getattr(resolve_target(name, **options), "parallel_cells", 1) for name in target_names)


def run_batch(entries: list[Entry], execute: Callable[[Entry], Record], advance: Callable[[Record], None],
              jobs: int) -> None:
    if jobs <= 1:
        for entry in entries:
            advance(execute(entry))
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for record in pool.map(execute, entries):
            advance(record)


class progress_bar:
    """A rich progress bar with ETA (or nothing when disabled); yields `advance(record)`."""

    def __init__(self, total: int, completed: int, path: Path, enabled: bool) -> None:
        self.total, self.completed, self.path, self.enabled = total, completed, path, enabled

    def __enter__(self) -> Callable[[Record], None]:
        if not self.enabled:
            return lambda record: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), transient=False)
        self.bar.start()
        task = self.bar.add_task(self.path.stem, total=self.total, completed=self.completed)

        def advance(record: Record) -> None:
            self.bar.update(task, advance=1, description=f"{record.cell.workload} {record.cell.label} "
                                                         f"-> {record.status}")
        return advance

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.stop()


def print_summary(expansion: Expansion, records: Iterable[Record], path: Path) -> None:
    from msbench.cli import print_table

    by_id = {r.cell_id: r for r in records}
    rows = []
    for e in expansion.entries:
        r = by_id.get(e.cell.id)
        if r is None:
            continue
        m = r.metrics
        rows.append([e.cell.id, e.cell.workload, e.cell.target, e.cell.label, r.status,
                     _fmt(m.step_time_s, ".4g"), _fmt(m.throughput, ".4g"),
                     _fmt(m.peak_memory_bytes and m.peak_memory_bytes / 2**30, ".3g"),
                     _fmt(m.accuracy_delta_pp, "+.2f"), (r.reason or "").splitlines()[0][:60] if r.reason else ""])
    print_table(["id", "workload", "target", "label", "status", "step s", "samples/s", "peak GiB", "acc Δpp",
                 "reason"], rows)
    counts: dict[str, int] = {}
    for r in by_id.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"{len(by_id)} cells recorded in {path}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def run_command(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs={args.jobs} is not allowed; allowed: an integer >= 1")
    if args.wait_quiet < 0:
        raise UserError(f"--wait-quiet={args.wait_quiet:g} is not allowed; allowed: seconds >= 0")
    result = run_matrix(args.matrix, target=args.target, out=args.out, run_id=args.run_id, resume=args.resume,
                        jobs=args.jobs, shard=args.shard, timeout=args.timeout, progress=not args.quiet,
                        extra=parse_assignments(args.set), wait_quiet_s=args.wait_quiet)
    print(result.path)
    return 0
