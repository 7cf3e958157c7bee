"""Which cells of matrices/validation.toml `msbench validate --profile cpu` measures by default.

The full matrix (every workload entry x one knob changed at a time: 40 cells) took 48-96 minutes here, so
the default is a subset chosen by a rule fixed before any error was looked at, not by hand:

- every workload entry's baseline (graph mode, fp32, the preset's batch): each family and size once,
  the two fitted ones (`fit`) and the three the fit never saw (`validate`);
- each one-knob change of the matrix (mode, AMP level, both batch sizes, recompute, graph-kernel fusion,
  gradient accumulation: every knob the model's CPU side distinguishes) once, on the `validate` entries
  taken in turn (the k-th change, in the matrix's order, on validate entry k mod their number), so the
  changes are spread over the families and every one is scored out of sample.

The goals are judged on the validate cells (here 3 baselines + 7 changes); the two fitted baselines only
check that the fit still holds. `--full` measures the whole matrix.
"""

from __future__ import annotations

from typing import Sequence

from hardware.calibration.cpu_runs import split_of
from msbench.cell import Cell

BASELINE = "base"


def entry_of(cell: Cell) -> tuple[str, str, str]:
    """The matrix's workload entry a cell belongs to: workload, preset and preset overrides."""
    return cell.workload, cell.preset, repr(sorted(cell.overrides.items()))


def quick_cells(cells: Sequence[Cell]) -> list[Cell]:
    """The default subset of an expanded one-factor-at-a-time matrix, in the matrix's order."""
    entries = list(dict.fromkeys(entry_of(c) for c in cells))
    validate = [e for e in entries if split_of(next(c for c in cells if entry_of(c) == e)) == "validate"]
    changes = list(dict.fromkeys(c.label for c in cells if c.label != BASELINE))
    if not validate:
        raise ValueError("the validation matrix has no validate entries (cells with preset overrides)")
    wanted = {(e, BASELINE) for e in entries}
    wanted |= {(validate[k % len(validate)], label) for k, label in enumerate(changes)}
    return [c for c in cells if (entry_of(c), c.label) in wanted]
