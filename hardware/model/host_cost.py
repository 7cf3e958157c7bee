"""Per-sample host cost of a workload's data pipeline, read from the versioned calibration file.

The device model never measures the machine it runs on: the cost of each workload's real
`mindspore.dataset` pipeline was measured once on the reference host by `msbench calibrate host`
(hardware/calibration/host_cost.py) and written to `hardware/calibration/host_cost.json` with its
date, spread, host and command. A prediction is then a pure function of its inputs and the file,
whose hash every prediction carries (`HostCost.calibration_hash`), like a profile's.
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
SCHEMA = 1                  # of the file; hardware/calibration/host_cost.py writes the same number


@dataclass(frozen=True)
class HostCost:
    """One calibrated pipeline (workload x preset x overrides x data format) on the reference host."""

    workload: str
    preset: str
    overrides: tuple[tuple[str, Any], ...]
    data_format: str
    per_sample_s: float                # median seconds per sample, 1 pipeline worker
    per_sample_2_workers_s: float      # the same with 2 workers
    python_per_sample_s: float         # of the 1-worker time: inside Python callables (recorded; not the serial part)
    bytes_per_sample: int              # one sample as the pipeline yields it (host -> device copy)
    calibration_hash: str              # sha256 of the calibration file


def entry_key(workload: str, preset: str, overrides: Mapping[str, Any], data_format: str) -> str:
    """The file's key of one entry: readable and canonical (overrides sorted, TOML-like values)."""
    extra = ",".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(overrides.items()))
    return f"{workload}/{preset}/{data_format}" + (f"/{extra}" if extra else "")


@functools.cache
def _load(path: Path) -> tuple[str, dict[str, Any]]:
    raw = path.read_bytes()
    data = json.loads(raw)
    if data.get("schema") != SCHEMA:
        raise UserError(f"{path}: schema={data.get('schema')!r} is not allowed; allowed: {SCHEMA} "
                        f"(re-measure it with `msbench calibrate host`)")
    return hashlib.sha256(raw).hexdigest(), data["entries"]


def calibration_hash(path: Path = CALIBRATION_FILE) -> str:
    return _load(path)[0]


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
    costs = {"seconds_per_sample.1": e["seconds_per_sample"]["1"],
             "seconds_per_sample.2": e["seconds_per_sample"]["2"],
             "bytes_per_sample": e["bytes_per_sample"], "python_seconds_per_sample": e["python_seconds_per_sample"]}
    for name, value in costs.items():          # a hand-edited or corrupt file must not move predictions silently
        minimum_ok = value >= 0 if name == "python_seconds_per_sample" else value > 0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not minimum_ok:
            raise UserError(f"{path.name}: {key}: {name}={value!r} is not allowed; allowed: a finite number "
                            f"{'>= 0' if name == 'python_seconds_per_sample' else '> 0'} (re-measure it with "
                            f"`msbench calibrate host {workload}`)")
    return HostCost(workload=workload, preset=preset, overrides=tuple(sorted(overrides.items())),
                    data_format=data_format, per_sample_s=e["seconds_per_sample"]["1"],
                    per_sample_2_workers_s=e["seconds_per_sample"]["2"],
                    python_per_sample_s=e["python_seconds_per_sample"], bytes_per_sample=e["bytes_per_sample"],
                    calibration_hash=digest)
