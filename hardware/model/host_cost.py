"""Per-stage host cost of a workload's data pipeline, read from the versioned calibration file.

The device model never measures the machine it runs on: the cost of each workload's real
`mindspore.dataset` pipeline was measured once on the reference host by `msbench calibrate host`
(hardware/calibration/host_cost.py) and written to `hardware/calibration/host_cost.json` with its
date, spread, host and command. Schema 2 stores what the pipelined scaling law
(hardware/model/host_time.py) needs: the CPU seconds per sample of each pipeline thread at one
worker, the Python consumer's, and the GIL-serial share of the Python callables. A prediction is a
pure function of its inputs and the file, whose hash every prediction carries, like a profile's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from msbench.errors import UserError

CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "calibration" / "host_cost.json"
SCHEMA = 2                  # of the file; hardware/calibration/host_cost.py writes the same number
REMEASURE = "msbench calibrate host --all"


@dataclass(frozen=True)
class PipelineStage:
    """One thread of the pipeline at one worker: a reader, a map, the batch op (named in the file)."""

    name: str
    cpu_s: float               # CPU seconds per sample of the thread (C++ and the Python it ran)
    python_s: float            # of which inside Python callables


@dataclass(frozen=True)
class HostCost:
    """One calibrated pipeline (workload x preset x overrides x data format) on the reference host."""

    workload: str
    preset: str
    overrides: tuple[tuple[str, Any], ...]
    data_format: str
    stages: tuple[PipelineStage, ...]
    consumer_s: float          # the Python iterator's CPU seconds per sample (only without dataset sink)
    gil_fraction: float        # share of the Python callables' time that holds the GIL (serial across threads)
    bytes_per_sample: int      # one sample as the pipeline yields it (host -> device copy)
    calibration_hash: str      # sha256 of the calibration file


def entry_key(workload: str, preset: str, overrides: Mapping[str, Any], data_format: str) -> str:
    """The file's key of one entry: readable and canonical (overrides sorted, TOML-like values)."""
    extra = ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(overrides.items()))
    return f"{workload}/{preset}/{data_format}" + (f"/{extra}" if extra else "")


@functools.cache
def _load(path: Path) -> tuple[str, dict[str, Any]]:
    raw, data = read_calibration(path)
    if data.get("schema") != SCHEMA:
        raise UserError(f"{path}: schema={data.get('schema')!r} is not allowed; allowed: {SCHEMA} "
                        f"(per-stage costs; re-measure every entry with `{REMEASURE}`)")
    return hashlib.sha256(raw).hexdigest(), data["entries"]


def read_calibration(path: Path) -> tuple[bytes, dict[str, Any]]:
    """(bytes, data) of the file: a JSON object whose entries are objects, or one line saying how to restore it."""
    restore = f"restore it with `git checkout -- {path}` or re-measure every entry with `{REMEASURE}`"
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except OSError as err:
        raise UserError(f"{path}: cannot read the host-cost calibration ({err.strerror}); {restore}") from None
    except ValueError as err:                          # JSONDecodeError, UnicodeDecodeError
        raise UserError(f"{path}: not valid JSON ({err}); {restore}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a JSON {type(data).__name__} is not allowed; allowed: an object with schema and "
                        f"entries; {restore}")
    entries = data.get("entries")
    if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
        raise UserError(f"{path}: entries={type(entries).__name__} is not allowed; allowed: an object of "
                        f"entry objects; {restore}")
    return raw, data


def calibration_hash(path: Path = CALIBRATION_FILE) -> str:
    return _load(path)[0]


def _number(path: Path, key: str, name: str, value: Any, low: float, high: float = math.inf) -> float:
    """A finite number in [low, high]; a hand-edited or corrupt file must not move predictions silently."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        allowed = f">= {low}" + (f" and <= {high}" if math.isfinite(high) else "")
        raise UserError(f"{path.name}: {key}: {name}={value!r} is not allowed; allowed: a finite number "
                        f"{allowed} (re-measure it with `{REMEASURE}`)")
    return float(value)


def _stages(path: Path, key: str, raw: Any) -> tuple[PipelineStage, ...]:
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path.name}: {key}: stages={raw!r} is not allowed; allowed: a non-empty list of "
                        f"{{name, cpu_seconds_per_sample, python_seconds_per_sample}} (re-measure it with `{REMEASURE}`)")
    stages = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict):
            raise UserError(f"{path.name}: {key}: stages[{i}]={s!r} is not allowed; allowed: an object "
                            f"(re-measure it with `{REMEASURE}`)")
        cpu = _number(path, key, f"stages[{i}].cpu_seconds_per_sample", s.get("cpu_seconds_per_sample"), 0.0)
        python = _number(path, key, f"stages[{i}].python_seconds_per_sample",
                         s.get("python_seconds_per_sample"), 0.0, cpu)
        stages.append(PipelineStage(str(s.get("name", f"thread {i}")), cpu, python))
    if not any(s.cpu_s > 0 for s in stages):
        raise UserError(f"{path.name}: {key}: stages={raw!r} is not allowed; allowed: at least one stage with "
                        f"cpu_seconds_per_sample > 0 (re-measure it with `{REMEASURE}`)")
    return tuple(stages)


def host_cost(workload: str, preset: str, overrides: Mapping[str, Any] | None, data_format: str,
              path: Path = CALIBRATION_FILE) -> HostCost:
    """The calibrated host cost of the cell's pipeline; a missing entry names the command that measures it."""
    overrides = dict(overrides or {})
    digest, entries = _load(path)
    key = entry_key(workload, preset, overrides, data_format)
    if key not in entries:
        flags = "".join(f" --override {k}={json.dumps(v)}" for k, v in sorted(overrides.items()))
        raise UserError(f"host cost {key!r} is not in {path.name}; measure it with: msbench calibrate host "
                        f"{workload} --preset {preset} --data-format {data_format}{flags}")
    e = entries[key]
    size = e.get("bytes_per_sample")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise UserError(f"{path.name}: {key}: bytes_per_sample={size!r} is not allowed; allowed: a whole number > 0 "
                        f"(re-measure it with `{REMEASURE}`)")
    return HostCost(workload=workload, preset=preset, overrides=tuple(sorted(overrides.items())),
                    data_format=data_format, stages=_stages(path, key, e.get("stages")),
                    consumer_s=_number(path, key, "consumer_seconds_per_sample",
                                       e.get("consumer_seconds_per_sample"), 0.0),
                    gil_fraction=_number(path, key, "gil_fraction", e.get("gil_fraction"), 0.0, 1.0),
                    bytes_per_sample=size, calibration_hash=digest)
