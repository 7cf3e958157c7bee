"""JSONL run files: one record per line, appended, flushed and fsynced, so a crash loses nothing earlier.

Loading never skips a bad line silently: it names the file and line. A run killed mid-write can leave
a last line without its newline; `RunStore.load(repair=True)` (used by --resume) moves that fragment
to `<run>.jsonl.partial` and says so, and the cell is run again.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Iterable

from msbench.errors import UserError
from msbench.records import Record


class CorruptRecordError(UserError):
    def __init__(self, path: Path, line_no: int, why: str) -> None:
        self.path, self.line_no = path, line_no
        super().__init__(f"{path}:{line_no}: corrupt record ({why})")


class RunStore:
    """The records of one run, in `<out>/<run-id>.jsonl`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: Record) -> None:
        line = record.to_json_line().encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def load(self, repair: bool = False) -> list[Record]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            line_no = data[:cut].count(b"\n") + 1
            if not repair:
                raise CorruptRecordError(self.path, line_no, "truncated last line (no newline)")
            partial = self.path.with_name(self.path.name + ".partial")
            partial.write_bytes(data[cut:])
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
            print(f"{self.path}:{line_no}: truncated last record moved to {partial}; its cell will run again",
                  file=sys.stderr)
            data = data[:cut]
        records = []
        for line_no, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(Record.from_json_line(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise CorruptRecordError(self.path, line_no, f"{type(err).__name__}: {err}") from None
        return records

    def recorded_ids(self, repair: bool = False) -> set[str]:
        return {r.cell_id for r in self.load(repair=repair)}


def run_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories to their `*.jsonl` files (sorted); a missing path is an error."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.rglob("*.jsonl")))
        elif p.exists():
            files.append(p)
        else:
            raise UserError(f"{p}: no such run file or directory")
    return files


def load_records(paths: Iterable[str | Path]) -> list[Record]:
    return [rec for f in run_files(paths) for rec in RunStore(f).load()]


def records_frame(records: Iterable[Record]):
    """One row per record (see Record.flat), as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame([r.flat() for r in records])
