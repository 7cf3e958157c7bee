"""Whether a recorded cell is still current: fingerprints of what produced a record's numbers, the
cells `--resume` must run again, and the short diff a re-run prints against the previous record.

A cell id names *what* was asked (workload, settings, target); the fingerprint names *what answered*
(the target's sources, the profile, the calibration files, MindSpore's version). Without it a resumed
run would keep numbers made by code or data that has since changed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from msbench.cache import content_key, file_hash
from msbench.records import Record
from msbench.resources import in_checkout_order, package_dir, suite_name

ROOT = package_dir("msbench").parent     # names a file outside the suite's packages (a plugin's) relative to it
Fingerprinter = Callable[[Any], "str | None"]


def files_digest(paths: Iterable[Path]) -> str:
    """Hash of every file (any type, hidden and cache files aside) under the given files and folders, by
    name in the repository (`hardware/model/predict.py`, wherever the package was unpacked) and content: a
    new, removed or edited file changes it."""
    digest = hashlib.sha256()
    for path in sorted((Path(p) for p in paths), key=in_checkout_order):
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and not f.name.startswith("."):
                digest.update(repository_name(f).encode() + b"\0" + file_hash(f).encode())
    return digest.hexdigest()[:20]


def repository_name(path: Path) -> str:
    return suite_name(path) or os.path.relpath(path, ROOT)


def fingerprint(*parts: Any) -> str:
    """The fingerprint of a record: a short hash of the parts that determine its numbers."""
    return content_key("fingerprint", *parts)


def recorded_options(accuracy: bool, accuracy_seeds: int, accuracy_knobs: tuple[str, ...] | None,
                     profiled: bool) -> dict[str, Any]:
    """The matrix options that change what a target writes into a record (accuracy runs and how many
    seeds, the Profiler's per-op summary), for its fingerprint: turning one on, or changing the seeds,
    re-runs the recorded cells on `--resume` instead of keeping records without them."""
    options: dict[str, Any] = {"accuracy": accuracy, "profile": profiled}
    if accuracy:
        options |= {"accuracy_seeds": accuracy_seeds,
                    "accuracy_knobs": None if accuracy_knobs is None else sorted(accuracy_knobs)}
    return options


def fingerprinter(targets: Mapping[str, Any]) -> Fingerprinter:
    """cell -> the fingerprint its target gives it (None for a target that has no `fingerprint`)."""
    def of(cell: Any) -> str | None:
        target = targets.get(cell.target)
        method = getattr(target, "fingerprint", None)
        return method(cell) if method else None
    return of


def stale_records(entries: Iterable[Any], done: Mapping[str, Record], of: Fingerprinter) -> dict[str, Record]:
    """Recorded cells to run again, id -> the old record: the fingerprint changed (a schema-1 record has
    none), or the settings rules now judge the cell differently (invalid then, valid now, or back)."""
    stale: dict[str, Record] = {}
    for entry in entries:
        old = done.get(entry.cell.id)
        if old is None:
            continue
        now_invalid = entry.status == "invalid"
        if now_invalid != (old.status == "invalid") or (not now_invalid and old.fingerprint != of(entry.cell)):
            stale[entry.cell.id] = old
    return stale


def rerun_line(count: int) -> str:
    return f"{count} cell{'s' if count != 1 else ''} re-run: their inputs changed"


def change_rows(stale: Mapping[str, Record], new: Iterable[Record]) -> list[list[str]]:
    """One row per re-run cell: its label, and each metric or status that moved, previous -> now."""
    rows = []
    for rec in new:
        old = stale.get(rec.cell_id)
        if old is None:
            continue
        moved = [f"{name} {_show(a)} -> {_show(b)}" for name, a, b in _compared(old, rec) if a != b]
        rows.append([rec.cell_id, rec.cell.workload, rec.cell.label, "; ".join(moved) or "same numbers"])
    return rows


def _compared(old: Record, new: Record) -> list[tuple[str, Any, Any]]:
    m0, m1 = old.metrics, new.metrics
    return [("status", old.status, new.status), ("step_s", m0.step_time_s, m1.step_time_s),
            ("samples/s", m0.throughput, m1.throughput), ("peak_bytes", m0.peak_memory_bytes, m1.peak_memory_bytes),
            ("acc_delta_pp", m0.accuracy_delta_pp, m1.accuracy_delta_pp)]


def _show(value: Any) -> str:
    if value is None:
        return "n/a"
    return format(value, ".4g") if isinstance(value, float) else str(value)
