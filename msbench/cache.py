"""On-disk cache for slow deterministic work (graph extraction, accuracy runs, host-cost probes).

Entries are JSON files named by a content key, so a changed input is a new entry, never a stale hit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

CACHE_ENV = "MSBENCH_CACHE"


def cache_root() -> Path:
    """`$MSBENCH_CACHE` (default `~/.cache/msbench`), shared by every checkout and asv env."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "msbench")


def cache_dir(kind: str) -> Path:
    """`<cache root>/<kind>`, created on first use."""
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_key(*parts: Any) -> str:
    """A short hash of JSON-serialisable parts (key order does not matter)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def source_hash(paths: Iterable[Path]) -> str:
    """Hash of source files (e.g. a workload's package), so editing the network invalidates its entries."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".toml"):
                digest.update(str(f.relative_to(path.parent)).encode())
                digest.update(f.read_bytes())
    return digest.hexdigest()[:20]


def cache_get(kind: str, key: str) -> dict[str, Any] | None:
    path = cache_dir(kind) / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def cache_put(kind: str, key: str, value: dict[str, Any]) -> None:
    """Atomic write (temp file + rename), so concurrent writers never leave a half-written entry."""
    path = cache_dir(kind) / f"{key}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    os.replace(tmp, path)


@contextlib.contextmanager
def file_lock(path: Path, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
    """`flock` on `path` (created if missing) for the block: across threads and processes, and released
    by the kernel if the holder dies."""
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cache_lock(kind: str, key: str) -> contextlib.AbstractContextManager[None]:
    """Held while an entry is computed, so parallel cells (`--jobs`) or two runs sharing the cache compute
    it once: the second waits and then reads the first one's entry."""
    return file_lock(cache_dir(kind) / f".{key}.lock")


def cached(kind: str, key: str, compute: Callable[[], dict[str, Any]],
           keep: Callable[[dict[str, Any]], bool] = lambda entry: True) -> tuple[dict[str, Any], bool]:
    """(entry, was_cached): the cached entry, or `compute()` (by one process at a time), stored under the
    key when `keep(entry)` (e.g. not a run that could not produce a number)."""
    hit = cache_get(kind, key)
    if hit is not None:
        return hit, True
    with cache_lock(kind, key):
        hit = cache_get(kind, key)
        if hit is not None:
            return hit, True
        entry = compute()
        if keep(entry):
            cache_put(kind, key, entry)
        return entry, False
