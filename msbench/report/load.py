"""Load what a report reads: msbench run files (via msbench.store) and asv results files.

Inputs are files or directories; a directory is searched for `*.jsonl` runs and asv results.
Records of one cell re-run in the same commit (a resumed or repeated run) count once: the latest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from msbench.cell import canonical_json
from msbench.errors import UserError
from msbench.gitrepo import first_parent_history, repo_root
from msbench.report.frame import components
from msbench.settings import DEFAULTS
from msbench.records import Metrics, Record
from msbench.compare import find_sources
from msbench.store import check_not_empty, load_records, records_frame

UNKNOWN_COMMIT = "unknown"
# Columns of a frame without records, so that every reader can filter it like a full one.
EMPTY_COLUMNS = ["cell_id", "workload", "preset", "overrides", "target", "label", "status", "reason", "commit",
                 *DEFAULTS, *(f.name for f in fields(Metrics) if f.name not in ("step_time_stats", "breakdown",
                                                                                 "peak_memory_detail", "extra"))]


@dataclass(frozen=True)
class RecordSet:
    """Records and their pandas frame, row i of the frame being record i.

    A record's commit is its run's: the commit of the run's first record. A run resumed after the
    tree moved on (or run while others commit) stays one side of a commit diff.
    """

    records: tuple[Record, ...]
    frame: pd.DataFrame

    @classmethod
    def of(cls, records: Iterable[Record]) -> "RecordSet":
        records = list(records)
        commits = run_commits(records)
        kept = latest_per_cell(records, commits)
        frame = records_frame(kept) if kept else pd.DataFrame(columns=EMPTY_COLUMNS)
        if kept:
            frame = frame.reset_index(drop=True)
            frame["overrides"] = [canonical_json(dict(r.cell.overrides)) for r in kept]
            frame["commit"] = [commit_of(r, commits) for r in kept]
            frame["made_at"] = [record_commit(r) for r in kept]          # the tree a record came from
            parts = pd.DataFrame([components(r.metrics) for r in kept]).add_prefix("component.")
            frame = pd.concat([frame, parts], axis=1)
        return cls(tuple(kept), frame)

    def commits(self) -> list[str]:
        """Commits present, oldest first: in git's first-parent order when this repository knows
        every one of them, else by the time of each commit's earliest record."""
        commits = run_commits(self.records)
        first: dict[str, float] = {}
        for rec in self.records:
            c = commit_of(rec, commits)
            first[c] = min(first.get(c, rec.started_at), rec.started_at)
        by_time = sorted(first, key=lambda c: first[c])
        if len(by_time) < 2:
            return by_time
        position = history_positions(str(Path.cwd()))
        if all(c in position for c in by_time):
            return sorted(by_time, key=lambda c: position[c])
        return by_time

    def of_commit(self, prefix: str) -> "RecordSet":
        commits = run_commits(self.records)
        return RecordSet.of(r for r in self.records if commit_of(r, commits).startswith(prefix))

    def spanning_runs(self) -> dict[str, list[str]]:
        """Runs whose records were made at more than one commit: run id -> those commits."""
        seen: dict[str, set[str]] = {}
        for rec in self.records:
            if rec.run_id:
                seen.setdefault(rec.run_id, set()).add(record_commit(rec))
        return {run: sorted(c) for run, c in sorted(seen.items()) if len(c) > 1}


@dataclass(frozen=True)
class Inputs:
    runs: RecordSet
    asv_dirs: tuple[Path, ...]         # asv results directories (holding benchmarks.json)
    sources: tuple[str, ...]


@functools.cache
def history_positions(where: str) -> dict[str, int]:
    """Commit -> its place in HEAD's first-parent history (0 = oldest); empty outside a repository."""
    try:
        history = first_parent_history(repo_root(Path(where)), "HEAD")
    except UserError:
        return {}
    return {commit: i for i, commit in enumerate(reversed(history))}


def record_commit(record: Record) -> str:
    return str(record.provenance.get("commit") or UNKNOWN_COMMIT)


def run_commits(records: Iterable[Record]) -> dict[str, str]:
    """Run id -> the commit of the run's first record."""
    first: dict[str, Record] = {}
    for rec in records:
        if rec.run_id and (rec.run_id not in first or rec.started_at < first[rec.run_id].started_at):
            first[rec.run_id] = rec
    return {run: record_commit(rec) for run, rec in first.items()}


def commit_of(record: Record, run_commit: dict[str, str]) -> str:
    return run_commit.get(record.run_id) or record_commit(record)


def latest_per_cell(records: Iterable[Record], run_commit: dict[str, str]) -> list[Record]:
    latest: dict[tuple[str, str], Record] = {}
    for rec in records:
        key = (rec.cell_id, commit_of(rec, run_commit))
        if key not in latest or rec.started_at >= latest[key].started_at:
            latest[key] = rec
    return sorted(latest.values(), key=lambda r: (r.cell.workload, r.cell.target, r.cell.label, r.cell_id))


def find_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[Path]]:
    """(run files, asv results directories) under the given files and directories."""
    runs: list[Path] = []
    asv: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            dirs, files = find_sources(path)
            asv.extend(d for d in dirs if d not in asv)
            runs.extend(files)
        elif path.is_file() and path.suffix == ".jsonl":
            runs.append(check_not_empty(path))
        elif path.exists():
            raise UserError(f"input={str(path)!r} is not allowed; allowed: run files (*.jsonl) and directories "
                            "(of runs, or an asv results directory holding benchmarks.json)")
        else:
            raise UserError(f"input={str(path)!r} does not exist; allowed: run files and directories")
    return runs, asv


def load_inputs(paths: Sequence[str | Path]) -> Inputs:
    runs, asv = find_files(paths)
    if not runs and not asv:
        raise UserError(f"inputs={[str(p) for p in paths]} hold no run files (*.jsonl) and no asv results; "
                        "allowed: run files and directories that contain them")
    records = load_records(runs) if runs else []
    return Inputs(RecordSet.of(records), tuple(asv), tuple(str(p) for p in [*runs, *asv]))
