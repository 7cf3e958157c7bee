"""Record: the result of one cell run, versioned and self-describing (one JSON line each)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from msbench.cell import Cell

SCHEMA = 2                 # 2: `fingerprint` (what produced the numbers); see MIGRATIONS
STATUSES = ("ok", "oom", "failed", "timeout", "unsupported", "invalid")
MAX_DEPTH = 64             # a record nests ~6 levels; a deeper line is refused before anything recurses on it


def migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 had no fingerprint: such a record's inputs are unknown, so `--resume` re-runs its cell."""
    return {**data, "fingerprint": None, "schema": 2}


MIGRATIONS = {1: migrate_1_to_2}     # from schema N to N + 1


def migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record's dict brought to SCHEMA, one step at a time; an unknown (or newer) schema is refused."""
    out = dict(data)
    version = out.get("schema")
    while version != SCHEMA:
        if version not in MIGRATIONS:
            allowed = ", ".join(str(v) for v in sorted([*MIGRATIONS, SCHEMA]))
            raise ValueError(f"schema={version!r} is not supported; allowed: {allowed}")
        out = MIGRATIONS[version](out)
        version = out["schema"]
    return out


@dataclass(frozen=True, kw_only=True)
class StepStats:
    """Statistics of measured step times (seconds); `ci95_rel` is the relative 95% CI half-width.

    A cell measured in several fresh processes keeps each process's median in `process_medians`; then
    `median` is their median and `ci95_rel` their Student-t interval, because steps of one process share
    its state and are not independent (pyperf's reason for spreading runs over worker processes).
    `iqr`, `cv` and `samples` stay step-level (all processes' steps). Empty for one-process records."""

    median: float
    iqr: float
    cv: float
    ci95_rel: float
    samples: list[float]
    process_medians: list[float] = field(default_factory=list)

    @property
    def process_cv(self) -> float | None:
        """std/mean of the process medians (None with fewer than two processes)."""
        xs = self.process_medians
        if len(xs) < 2:
            return None
        mean = sum(xs) / len(xs)
        return (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 / mean


@dataclass(kw_only=True)
class Metrics:
    """What a target reports. Every field is optional: a failed cell has none, the model has no samples."""

    step_time_s: float | None = None            # median seconds per optimizer step (all micro-batches)
    step_time_stats: StepStats | None = None    # measured runs only
    throughput: float | None = None             # global samples per second (all devices)
    throughput_per_device: float | None = None
    peak_memory_bytes: int | None = None        # the headline peak (see peak_memory_source)
    peak_memory_source: str | None = None       # e.g. "model", "device_max_allocated", "pool+params", "rss"
    peak_memory_detail: dict[str, int] = field(default_factory=dict)
    memory_capacity_bytes: int | None = None
    oom: bool | None = None
    compile_time_s: float | None = None
    accuracy: float | None = None               # headline quality metric in [0, 1] of the tiny-preset run
    accuracy_metric: str | None = None
    accuracy_delta_pp: float | None = None      # against the matrix baseline cell, percentage points
    accuracy_delta_ci95_pp: list[float] | None = None   # [lo, hi] over seed-paired runs (None: one seed)
    bound: str | None = None                    # compute|memory|host|data|comm
    mfu: float | None = None
    breakdown: dict[str, float] = field(default_factory=dict)   # seconds per component
    # scenario=inference: seconds per forward call at the cell's batch size, {"p50", "p90", "p99"}
    latency_s: dict[str, float] = field(default_factory=dict)
    # per-op time of a step: measured (MindSpore's Profiler, `--profile`) or predicted (the device model);
    # see hardware/mindspore/profiling.py for its keys
    op_profile: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class Record:
    """One cell run. `status` is one of STATUSES; `reason` says why when it is not ok."""

    cell: Cell
    status: str
    reason: str | None = None
    metrics: Metrics = field(default_factory=Metrics)
    provenance: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    profile_hash: str | None = None
    fingerprint: str | None = None      # hash of what determined the numbers (the target's sources, profile...)
    started_at: float = field(default_factory=time.time)
    duration_s: float = 0.0
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r} is not allowed; allowed: {'|'.join(STATUSES)}")

    @property
    def cell_id(self) -> str:
        return self.cell.id

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cell"] = self.cell.to_dict()
        out["cell_id"] = self.cell.id
        out["metrics"] = asdict(self.metrics)
        return out

    def to_json_line(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Record":
        data = migrate(data)
        metrics = dict(data.get("metrics") or {})
        stats = metrics.pop("step_time_stats", None)
        known = {f.name for f in fields(Metrics)}
        unknown = sorted(set(metrics) - known)
        if unknown:
            raise ValueError(f"metrics.{unknown[0]} is not a known metric; allowed: {', '.join(sorted(known))}")
        cell = Cell.from_dict(data["cell"])
        if data.get("cell_id", cell.id) != cell.id:
            raise ValueError(f"cell_id={data['cell_id']!r} does not match its cell (computed {cell.id})")
        if data["cell"].get("id", cell.id) != cell.id:
            raise ValueError(f"cell.id={data['cell']['id']!r} does not match its cell (computed {cell.id})")
        return cls(
            cell=cell,
            status=data["status"],
            reason=data.get("reason"),
            metrics=Metrics(step_time_stats=StepStats(**stats) if stats else None, **metrics),
            provenance=dict(data.get("provenance") or {}),
            run_id=data.get("run_id", ""),
            profile_hash=data.get("profile_hash"),
            fingerprint=data.get("fingerprint"),
            started_at=data.get("started_at", 0.0),
            duration_s=data.get("duration_s", 0.0),
        )

    @classmethod
    def from_json_line(cls, line: str) -> "Record":
        try:
            data = json.loads(line)
        except RecursionError:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
        check_depth(data)
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        return cls.from_dict(data)

    def flat(self) -> dict[str, Any]:
        """One flat row for pandas: cell fields, knobs (all of them), metrics.* and a few provenance keys."""
        row: dict[str, Any] = {
            "cell_id": self.cell.id, "workload": self.cell.workload, "preset": self.cell.preset,
            "target": self.cell.target, "label": self.cell.label, "scenario": self.cell.scenario,
            "status": self.status,
            "reason": self.reason, "run_id": self.run_id, "started_at": self.started_at,
            "commit": self.provenance.get("commit"), "profile_hash": self.profile_hash,
            "fingerprint": self.fingerprint,
        }
        row.update(self.cell.settings.to_dict())
        for key, value in asdict(self.metrics).items():
            if key == "step_time_stats":
                for stat in ("iqr", "cv", "ci95_rel"):
                    row[f"step_time_{stat}"] = value[stat] if value else None
                row["step_time_process_cv"] = self.metrics.step_time_stats.process_cv if value else None
                row["processes"] = len(value["process_medians"]) if value else None
            elif isinstance(value, dict):
                for sub, subval in value.items():
                    row[f"{key}.{sub}"] = subval
            else:
                row[key] = value
        return row


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit` (walked without recursion), so no reader dies of RecursionError."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise ValueError(f"nested deeper than {limit} levels")
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
