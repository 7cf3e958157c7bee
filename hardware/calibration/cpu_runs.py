"""Real runs of matrices/validation.toml on `mindspore:cpu`, as both the cpu-profile fitter
(hardware/calibration/fit.py) and the CPU comparison (`msbench validate --profile cpu`) read them: which
cells are fitted, the cells measured, and the CPUs they were measured on. Here, under calibration, because
calibration never imports the validation package (tests/hardware/test_validation_isolation.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from msbench.cell import Cell
from msbench.records import Record
from msbench.store import RunStore


def split_of(cell: Cell) -> str:
    """`fit` for a tiny preset as shipped, `validate` for any resized one (see the matrix's header)."""
    return "fit" if not cell.overrides else "validate"


def measured_records(run_path: Path) -> list[Record]:
    return [r for r in RunStore(run_path).load() if r.status == "ok" and r.metrics.step_time_s]


def measured_cpus(records: Sequence[Record]) -> list[str]:
    """The CPU models (provenance.cpu.model) the records were measured on."""
    return sorted({str((r.provenance.get("cpu") or {}).get("model", "")) for r in records})
