"""JSONL run files: one record per line, appended, flushed and fsynced, so a crash loses nothing earlier.

Loading never skips a bad line silently: it names the file and line. A run killed mid-write can leave
a last line without its newline; `RunStore.load(repair=True)` (used by --resume) moves that fragment
to `<run>.jsonl.partial` and says so, and the cell is run again.

One writer per run: `RunStore.hold()` takes an exclusive flock on the run file for the life of the
run, so a second `msbench run` on the same run id is refused naming the holder. A write checks what
the kernel took, retries a partial write, fsyncs, and on a full disk cuts the file back to its last
whole record and raises `DiskFullError`: never a silently truncated record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import math
import os
import signal
import sys
import threading
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from msbench.cache import lock_holder
from msbench.errors import UserError
from msbench.records import Record


INFINITE_ALLOWED = (".ci95_rel",)      # +inf: the interval of fewer than two values (hardware/mindspore/measure.py)


class NotFiniteError(TypeError):
    """NaN or an infinity where a number must be finite (not retried against a Union's other options)."""


class CorruptRecordError(UserError):
    def __init__(self, path: Path, line_no: int, why: str) -> None:
        self.path, self.line_no = path, line_no
        super().__init__(f"{path}:{line_no}: corrupt record ({why})")


class DiskFullError(UserError):
    """The run file's disk is full: the records already written are whole, the one being written is not kept."""


class RunLockedError(UserError):
    pass


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is taken (a write may take fewer bytes than asked, e.g. near a full disk)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, "no bytes written")
        view = view[written:]


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT/SIGTERM wait until the block ends, so an interrupt never cuts a record in half."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class RunStore:
    """The records of one run, in `<out>/<run-id>.jsonl`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.skipped: list[CorruptRecordError] = []      # the corrupt lines `load(skip_corrupt=True)` passed over

    @contextlib.contextmanager
    def hold(self, resume: bool) -> Iterator[None]:
        """Be the run file's only writer for the block (flock, released by the kernel if this process dies).
        Without `resume` a file that already has records is refused."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UserError(f"cannot open the run file {self.path}: {err.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = lock_holder(self.path)
                raise RunLockedError(f"{self.path} is being written by another msbench run "
                                     f"(PID {holder if holder else 'unknown'}); wait for it or choose another "
                                     f"--run-id") from None
            if not resume and os.fstat(fd).st_size > 0:
                raise UserError(f"{self.path} exists; pass --resume to continue it or choose another --run-id")
            yield
        finally:
            os.close(fd)

    def append(self, record: Record) -> None:
        line = record.to_json_line().encode()
        with self._lock, signals_held():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = os.fstat(fd).st_size
                try:
                    write_all(fd, line)
                    os.fsync(fd)
                except OSError as err:
                    os.ftruncate(fd, start)        # no half record left behind
                    if err.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise DiskFullError(f"{self.path}: disk full") from None
                    raise UserError(f"cannot write to the run file {self.path}: {err.strerror}") from None
            finally:
                os.close(fd)

    def load(self, repair: bool = False, skip_corrupt: bool = False) -> list[Record]:
        """The file's records. A corrupt line raises CorruptRecordError; with `skip_corrupt` it is said on
        `self.skipped` and the rest of the file is still read."""
        self.skipped = []
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            line_no = data[:cut].count(b"\n") + 1
            if not repair:
                corrupt = CorruptRecordError(self.path, line_no, "truncated last line (no newline)")
                if not skip_corrupt:
                    raise corrupt
                self.skipped.append(corrupt)
                data = data[:cut]
        if data and not data.endswith(b"\n"):
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
                record = Record.from_json_line(line)
                check_types(record, "record")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
                corrupt = CorruptRecordError(self.path, line_no, f"{type(err).__name__}: {err}")
                if not skip_corrupt:
                    raise corrupt from None
                self.skipped.append(corrupt)
                continue
            records.append(record)
        return records

    def recorded_ids(self, repair: bool = False) -> set[str]:
        return {r.cell_id for r in self.load(repair=repair)}


def check_types(value: Any, where: str, hint: Any = None) -> None:
    """A record read from a file has the types its dataclasses declare (a number where a number belongs),
    so readers never meet a string in a metric. Raises TypeError naming the field."""
    if hint is None or dataclasses.is_dataclass(hint):
        cls = type(value) if hint is None else hint
        if not isinstance(value, cls):
            raise TypeError(f"{where}={value!r} is not allowed; allowed: a table of {cls.__name__} fields")
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name != "settings":                          # Settings checked its own values
                check_types(getattr(value, f.name), f"{where}.{f.name}", hints[f.name])
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        for option in args:
            try:
                return check_types(value, where, option)
            except NotFiniteError:
                raise
            except TypeError:
                continue
        raise TypeError(f"{where}={value!r} is not allowed; allowed: {hint}")
    if hint is Any:
        return
    if hint is type(None):
        ok = value is None
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and not math.isfinite(value) and not (value == math.inf and where.endswith(INFINITE_ALLOWED)):
            raise NotFiniteError(f"{where}={value!r} is not allowed; allowed: a finite number")
    elif hint in (int, str, bool):
        ok = type(value) is hint
    elif origin in (dict, Mapping) or hint in (dict, Mapping):
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        if ok and len(args) == 2:
            for k, v in value.items():
                check_types(v, f"{where}.{k}", args[1])
    elif origin is list:
        ok = isinstance(value, list)
        if ok:
            for i, v in enumerate(value):
                check_types(v, f"{where}[{i}]", args[0])
    else:
        ok = True
    if not ok:
        raise TypeError(f"{where}={value!r} is not allowed; allowed: {getattr(hint, '__name__', hint)}")


def run_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories to their `*.jsonl` files (sorted); a missing path is an error."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("*.jsonl"))
            if not found:
                raise UserError(f"{p}: a directory with no run files (*.jsonl)")
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            raise UserError(f"{p}: no such run file or directory")
    return files


def check_not_empty(path: Path) -> Path:
    """A run file named on the command line holds something (an empty one is refused like an empty directory)."""
    if path.is_file() and path.stat().st_size == 0:
        raise UserError(f"{path}: an empty run file (0 bytes, no records)")
    return path


def load_records(paths: Iterable[str | Path]) -> list[Record]:
    """Every record of the run files, for reading commands: a corrupt line is named and skipped; files that
    hold corrupt lines and nothing else are refused with the first one."""
    records: list[Record] = []
    skipped: list[CorruptRecordError] = []
    for f in run_files(paths):
        store = RunStore(f)
        records.extend(store.load(skip_corrupt=True))
        skipped.extend(store.skipped)
    if skipped and not records:
        raise skipped[0]
    for err in skipped:
        print(f"{err}; skipped", file=sys.stderr)
    return records


def records_frame(records: Iterable[Record]):
    """One row per record (see Record.flat), as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame([r.flat() for r in records])
