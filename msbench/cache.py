"""On-disk cache for slow deterministic work (graph extraction, accuracy runs, host-cost probes).

Entries are JSON files named by a content key, so a changed input is a new entry, never a stale hit.
An entry that does not match its kind's schema (a `validate` callable: `{}`, `[]`, binary junk, a
negative host cost) is a miss and is recomputed, never a crash of every later command. Lock waits are
bounded and say who holds the lock; a full disk or a lock path that is a directory is one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import errno
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from msbench.child import ancestors, descendants
from msbench.errors import UserError

CACHE_ENV = "MSBENCH_CACHE"
LOCK_TIMEOUT_ENV = "MSBENCH_LOCK_TIMEOUT"
LOCK_TIMEOUT_S = 4 * 3600.0          # longer than any entry takes to compute (a cold BERT-large compile)
Validator = Callable[[Any], object]   # raises (or returns False) when an entry does not match its schema


def cache_root() -> Path:
    """`$MSBENCH_CACHE` (default `~/.cache/msbench`), shared by every checkout and asv env."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "msbench")


def cache_dir(kind: str) -> Path:
    """`<cache root>/<kind>`, created on first use."""
    path = cache_root() / kind
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cache directory {path}: {err.strerror} (set ${CACHE_ENV} to a writable directory)") from None
    return path


def content_key(*parts: Any) -> str:
    """A short hash of JSON-serialisable parts (key order does not matter)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


_FILE_HASHES: dict[tuple[str, int, int], str] = {}     # (path, mtime_ns, size) -> sha256: read each file once


def file_hash(path: Path) -> str:
    """sha256 of a file's bytes, read once per (path, modification time, size) in this process."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _FILE_HASHES:
        _FILE_HASHES[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _FILE_HASHES[key]


def source_hash(paths: Iterable[Path]) -> str:
    """Hash of source files (e.g. a workload's package), so editing the network invalidates its entries."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".toml"):
                digest.update(str(f.relative_to(path.parent)).encode() + b"\0" + file_hash(f).encode())
    return digest.hexdigest()[:20]


def cache_has(kind: str, key: str) -> bool:
    """Whether an entry file exists: a cheap first look (`cache_get` reads and validates it)."""
    return (cache_dir(kind) / f"{key}.json").is_file()


def cache_get(kind: str, key: str, validate: Validator | None = None) -> dict[str, Any] | None:
    """The entry, or None when it is missing or does not match its schema (then it will be recomputed)."""
    path = cache_dir(kind) / f"{key}.json"
    try:
        entry = json.loads(path.read_bytes().decode())
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(entry, dict):
        return None
    if validate is not None:
        try:
            if validate(entry) is False:
                return None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
    return entry


def cache_put(kind: str, key: str, value: dict[str, Any]) -> None:
    """Atomic write (temp file + rename), so concurrent writers never leave a half-written entry."""
    path = cache_dir(kind) / f"{key}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(value, sort_keys=True))
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        why = "disk full" if err.errno == errno.ENOSPC else err.strerror
        raise UserError(f"cannot write the cache entry {path}: {why} (free space or set ${CACHE_ENV})") from None


def lock_holders(path: Path) -> list[int]:
    """The PIDs holding a flock on `path` (several for a shared lock), from /proc/locks (Linux); [] when unknown."""
    holders = []
    try:
        inode = os.stat(path).st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                continue
            if int(fields[5].rsplit(":", 1)[-1]) == inode and int(fields[4]) > 0:
                holders.append(int(fields[4]))
    except (OSError, ValueError):
        return []
    return holders


def lock_holder(path: Path) -> int | None:
    """The PID holding a flock on `path`, from /proc/locks (Linux); None when unknown."""
    return next(iter(lock_holders(path)), None)


def held_by_own_tree(path: Path, holders: list[int]) -> bool:
    """Whether this process's own tree (itself, its ancestors, its descendants: a run and its compile children)
    holds the lock: a wait on ourselves is not news. With no holder known, whether one of them has it open."""
    own = {os.getpid(), *descendants(os.getpid()), *ancestors(os.getpid())}
    if holders:
        return set(holders) <= own
    try:
        target = os.stat(path)
    except OSError:
        return False
    for pid in own - {os.getpid()}:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
    return False


def lock_timeout() -> float:
    text = os.environ.get(LOCK_TIMEOUT_ENV)
    try:
        return float(text) if text else LOCK_TIMEOUT_S
    except ValueError:
        raise UserError(f"${LOCK_TIMEOUT_ENV}={text!r} is not allowed; allowed: seconds, a number > 0") from None


def open_lock_file(path: Path):  # noqa: ANN201 - a text file handle
    try:
        return open(path, "a")
    except IsADirectoryError:
        raise UserError(f"lock file {path} is a directory; remove it") from None
    except OSError as err:
        raise UserError(f"cannot open the lock file {path}: {err.strerror}") from None


@contextlib.contextmanager
def file_lock(path: Path, mode: int = fcntl.LOCK_EX, timeout: float | None = None) -> Iterator[None]:
    """`flock` on `path` (created if missing) for the block: across threads and processes, and released
    by the kernel if the holder dies. A wait says on stderr who holds it and ends after `timeout` seconds
    (default: $MSBENCH_LOCK_TIMEOUT or LOCK_TIMEOUT_S) with an error."""
    limit = lock_timeout() if timeout is None else timeout
    with open_lock_file(path) as handle:
        deadline, told = time.monotonic() + limit, False
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holders = lock_holders(path)
                who = f"PID {holders[0]}" if holders else "another process"
                if time.monotonic() >= deadline:
                    raise UserError(f"timed out after {limit:g} s waiting for the lock on {path} held by {who}") from None
                if not told:
                    told = True
                    if not held_by_own_tree(path, holders):
                        print(f"waiting for the lock on {path} held by {who} ...", file=sys.stderr)
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cache_lock(kind: str, key: str) -> contextlib.AbstractContextManager[None]:
    """Held while an entry is computed, so parallel cells (`--jobs`) or two runs sharing the cache compute
    it once: the second waits and then reads the first one's entry."""
    return file_lock(cache_dir(kind) / f".{key}.lock")


def cached(kind: str, key: str, compute: Callable[[], dict[str, Any]],
           keep: Callable[[dict[str, Any]], bool] = lambda entry: True,
           validate: Validator | None = None) -> tuple[dict[str, Any], bool]:
    """(entry, was_cached): the cached entry, or `compute()` (by one process at a time), stored under the
    key when `keep(entry)` (e.g. not a run that could not produce a number). An entry failing `validate`
    is recomputed and replaced."""
    hit = cache_get(kind, key, validate)
    if hit is not None:
        return hit, True
    with cache_lock(kind, key):
        hit = cache_get(kind, key, validate)
        if hit is not None:
            return hit, True
        entry = compute()
        if keep(entry):
            cache_put(kind, key, entry)
        return entry, False
