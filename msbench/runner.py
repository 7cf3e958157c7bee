"""Run a matrix's cells on a target, one record each, resumable, shardable, with a progress bar.

Each cell runs through msbench.cell_run (on isolated targets, real MindSpore runs, in a fresh worker process
with a timeout: a crash, an out-of-memory kill or a hang becomes a record) and the run goes on.
The run holds its file's lock throughout (one writer per run). SIGINT/SIGTERM kill the children,
keep every finished record, and say how to resume; a full disk stops the run with the same promise.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping

from msbench.cell_run import check_timeout
from msbench.child import Terminated
from msbench.errors import UserError
from msbench.outputs import check_dir
from msbench.accuracy_phase import add_accuracies, deferring, is_pending, mark_pending
from msbench.console import print_table
from msbench.executors import CellJob, check_executor, executor_name, open_executor
from msbench.freshness import change_rows, fingerprinter, rerun_line, stale_records
from msbench.matrix import MAX_CELLS, Entry, Expansion
from msbench.matrix_file import load_matrix
from msbench.names import check_name
from msbench.plugins import check_spec
from msbench.progress import progress as show
from msbench.provenance import capture_provenance
from msbench.records import Record
from msbench.settings import parse_assignments
from msbench.stats import paired_delta_pp
from msbench.store import DiskFullError, RunStore
from msbench.targets import resolve_target


class RunInterrupted(Exception):
    """SIGINT/SIGTERM during a run: the finished records are saved; the cells in progress are not."""

    def __init__(self, path: Path, saved: int, total: int, exit_code: int) -> None:
        self.path, self.saved, self.total, self.exit_code = path, saved, total, exit_code
        super().__init__(f"saved {saved} of {total} cells in {path}")


@dataclass
class RunResult:
    path: Path
    records: list[Record]          # records written by this invocation
    skipped: int                   # cells already recorded (resume) or outside the shard
    rerun: int = 0                 # recorded cells run again because their fingerprint changed


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


def profile_root(run_path: Path) -> Path:
    """Where a run's Profiler output goes (absolute: the measuring child works in a scratch folder)."""
    return run_path.resolve().with_name(f"{run_path.stem}.profiles")


def run_matrix(matrix_path: str | Path, *, target: str | None = None, out: str | Path = "results/runs",
               run_id: str | None = None, resume: bool = False, jobs: int | None = None, shard: str = "1/1",
               timeout: float = 1800.0, progress: bool = True, extra: Mapping[str, Any] | None = None,
               plugins: Iterable[str] = (), max_cells: int = MAX_CELLS, executor: str | None = None,
               address: str | None = None, trace_dir: str | Path | None = None,
               wait_quiet_s: float = 0.0, only: Collection[str] | None = None) -> RunResult:
    """Run the matrix's pending cells on `executor` (msbench.executors: local, or ray at `address`);
    `only`: these cell ids of it and no others (a subset chosen by a caller, e.g. validate's default)."""
    check_timeout(timeout)
    if jobs is not None and (type(jobs) is not int or jobs < 1):
        raise UserError(f"--jobs={jobs!r} is not allowed; allowed: an integer >= 1")
    if type(max_cells) is not int or max_cells < 1:
        raise UserError(f"--max-cells={max_cells!r} is not allowed; allowed: an integer >= 1")
    plugins = tuple(check_spec(p) for p in plugins)
    if run_id is not None:
        check_name("--run-id", run_id)
    matrix = load_matrix(matrix_path, target=target, extra=extra, plugins=plugins)
    if trace_dir is not None and not all(t.startswith("model:") for t in matrix.targets):
        raise UserError(f"--trace-dir={str(trace_dir)!r} is not allowed for targets {', '.join(matrix.targets)}; "
                        "allowed: model:<profile> targets (a trace is of a predicted step)")
    if trace_dir is not None:
        check_dir("--trace-dir", trace_dir)        # before any cell: a bad one would fail every cell
    expansion = matrix.expand(max_cells)
    shard_ij = parse_shard(shard)
    out = check_dir("--out", out)
    label = target or "+".join(matrix.targets)
    path = out / f"{run_id}.jsonl" if run_id else default_run_path(out, matrix.name, label, shard_ij, resume)
    todo = [e for e in expansion.entries if e.status != "excluded" and in_shard(e.cell.id, shard_ij)
            and (only is None or e.cell.id in only)]
    if not todo:
        where = f" in shard {shard}" if shard_ij[1] > 1 else ""
        raise UserError(f"{matrix.name}: no cells to run{where} ({expansion.summary_line()}); nothing was written")
    options: dict[str, Any] = {"accuracy": matrix.accuracy, **({"trace_dir": str(trace_dir)} if trace_dir is not None else {})}
    if matrix.accuracy:
        options["accuracy_seeds"] = matrix.accuracy_seeds
    if matrix.profile:                  # the Profiler's folders beside the run file: <run>.profiles/<cell id>/
        options["profile_dir"] = str(profile_root(path))
    if matrix.accuracy_knobs is not None:
        options["accuracy_knobs"] = matrix.accuracy_knobs
    jobs = jobs or default_jobs(matrix.targets, options, plugins)       # resolves every target before any file
    check_executor(executor, address)                                   # and the cluster's address
    store = RunStore(path)
    with store.hold(resume):
        return _run_held(expansion, todo, store, resume, jobs, timeout, progress, plugins, options,
                         executor, address, wait_quiet_s)


def _run_held(expansion: Expansion, todo: list[Entry], store: RunStore, resume: bool, jobs: int,
              timeout: float, progress: bool, plugins: tuple[str, ...], options: Mapping[str, Any],
              executor: str | None, address: str | None, wait_quiet_s: float) -> RunResult:
    """The run proper, while this process holds the run file."""
    path = store.path
    done = {r.cell_id: r for r in store.load(repair=True)} if resume else {}
    targets = {name: resolve_target(name, plugins, **options) for name in expansion.matrix.targets}
    fingerprint_of = fingerprinter(targets)
    defer = deferring(targets, options)                     # predictions first, the accuracy trainings after
    stale = stale_records(todo, done, fingerprint_of)       # recorded, but made by inputs that changed since
    pending = [e for e in todo if e.cell.id not in done or e.cell.id in stale]
    in_todo = {e.cell.id for e in todo}
    untrained = [r for r in done.values() if defer and is_pending(r) and r.cell_id in in_todo and r.cell_id not in stale]
    pending.sort(key=lambda e: not e.baseline)          # baselines first: their accuracy anchors the deltas
    if stale and progress:
        print(rerun_line(len(stale)))
    provenance = capture_provenance()
    run_name = path.stem
    baselines = {r.cell_id: r for r in done.values()}
    written: list[Record] = []

    def with_delta(entry: Entry, record: Record) -> None:
        base_cell = expansion.baseline_of(entry.cell)
        if not entry.baseline and base_cell is not None:
            with_accuracy_delta(record, baselines.get(base_cell.id))
        elif entry.baseline:
            with_accuracy_delta(record, record)
        store.append(record)
        if entry.baseline:
            baselines[entry.cell.id] = record

    def finish(entry: Entry, record: Record) -> None:
        record.run_id, record.provenance = run_name, {**provenance, **record.provenance}   # + where it ran
        record.fingerprint = None if entry.status == "invalid" else fingerprint_of(entry.cell)
        if defer:
            mark_pending(record)
        with_delta(entry, record)
        written.append(record)
        advance(record)

    entries = {e.cell.id: e for e in todo}

    first = [e for e in pending if e.baseline]
    rest = [e for e in pending if not e.baseline]
    job = CellJob(options={**options, "defer_accuracy": True} if defer else options, timeout=timeout, plugins=plugins,
                  wait_quiet_s=wait_quiet_s)
    try:
        with open_executor(executor, jobs=jobs, address=address) as cells, \
                show(len(todo), len(todo) - len(pending), "predictions", enabled=progress) as advance:
            cells.prepare(pending, job, announce=print if progress else lambda line: None)
            for batch in (first, rest):
                cells.run(batch, job, finish)
        to_train = untrained + [r for r in written if is_pending(r)]
        if to_train:
            if progress:
                print("predictions (accuracy follows):")
                print_summary(expansion, list(done.values()) + written, path)
            anchors = {r.cell_id: baseline_id(expansion, entries[r.cell_id]) for r in to_train}
            with show(len(to_train), 0, "accuracy", enabled=progress) as advance:
                add_accuracies(to_train, targets, lambda r: anchors[r.cell_id],
                               lambda r: with_delta(entries[r.cell_id], r), advance)
    except DiskFullError:
        raise UserError(f"disk full after {len(done) + len(written)} of {len(todo)} cells; records so far are "
                        f"intact in {path}; free space and rerun with --resume") from None
    except (KeyboardInterrupt, Terminated) as err:
        code = 130 if isinstance(err, KeyboardInterrupt) else 143
        raise RunInterrupted(path, len(done) + len(written), len(todo), code) from None
    if progress:
        print_summary(expansion, list(done.values()) + written, path)
        if stale:
            print(rerun_line(len(stale)) + "; against the previous record:")
            print_table(["id", "workload", "label", "previous -> now"], change_rows(stale, written))
    return RunResult(path=path, records=written, skipped=len(expansion.entries) - len(pending), rerun=len(stale))


def baseline_id(expansion: Expansion, entry: Entry) -> str | None:
    """The id of the cell whose accuracy the entry's delta is read against (None for a baseline)."""
    base = None if entry.baseline else expansion.baseline_of(entry.cell)
    return None if base is None else base.id


def default_jobs(target_names: Iterable[str], options: Mapping[str, Any], plugins: tuple[str, ...] = ()) -> int:
    """Cells at once when `--jobs` is not given: what every target allows (`parallel_cells`; 1 when a
    target does not say, since a measuring target must not share the host with another cell)."""
    return min(getattr(resolve_target(name, plugins, **options), "parallel_cells", 1) for name in target_names)


def print_summary(expansion: Expansion, records: Iterable[Record], path: Path) -> None:
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
    nodes: dict[str, int] = {}
    for r in by_id.values():
        where = r.provenance.get("node") or r.provenance.get("host") or "?"
        nodes[where] = nodes.get(where, 0) + 1
    print("per node: " + ", ".join(f"{where} {n}" for where, n in sorted(nodes.items())))


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def run_command(args: argparse.Namespace) -> int:
    if args.jobs is not None and executor_name(args.executor) == "ray":
        raise UserError(f"--jobs={args.jobs} is not allowed with --executor ray; allowed: with --executor local "
                        "(on Ray the cells' resources decide how many run at once)")
    if args.wait_quiet < 0:
        raise UserError(f"--wait-quiet={args.wait_quiet:g} is not allowed; allowed: seconds >= 0")
    try:
        result = run_matrix(args.matrix, target=args.target, out=args.out, run_id=args.run_id, resume=args.resume,
                            jobs=args.jobs, shard=args.shard, timeout=args.timeout, progress=not args.quiet,
                            extra=parse_assignments(args.set), plugins=args.allow_plugin, max_cells=args.max_cells,
                            executor=args.executor, address=args.address,
                            trace_dir=args.trace_dir, wait_quiet_s=args.wait_quiet)
    except RunInterrupted as stop:
        print(f"msbench run: interrupted: saved {stop.saved} of {stop.total} cells in {stop.path}; resume with: "
              f"{resume_command(args, stop.path)}", file=sys.stderr)
        return stop.exit_code
    print(result.path)
    return 0


def resume_command(args: argparse.Namespace, path: Path) -> str:
    """The command line that continues this run."""
    words = ["msbench", "run", args.matrix, "--out", args.out, "--resume", "--run-id", path.stem]
    chosen = executor_name(args.executor)     # also what $MSBENCH_EXECUTOR / $RAY_ADDRESS chose: the line runs anywhere
    address = args.address or (os.environ.get("RAY_ADDRESS") if chosen == "ray" else None)
    for flag, value in (("--target", args.target), ("--shard", None if args.shard == "1/1" else args.shard),
                        ("--jobs", args.jobs), ("--timeout", None if args.timeout == 1800.0 else args.timeout),
                        ("--executor", chosen if args.executor or chosen != "local" else None),
                        ("--address", address), ("--trace-dir", args.trace_dir),
                        ("--wait-quiet", args.wait_quiet or None)):
        if value is not None:
            words += [flag, str(value)]
    for flag, values in (("--set", args.set), ("--allow-plugin", args.allow_plugin)):
        for value in values:
            words += [flag, value]
    if args.max_cells != MAX_CELLS:
        words += ["--max-cells", str(args.max_cells)]
    return shlex.join(words)
