"""A deterministic stand-in target for the asv plumbing tests: numbers computed from the preset alone.

Its cost grows with every size field of the cell's preset, so widening a layer in a commit lowers
throughput and raises memory, as the device model would; it imports no MindSpore and runs in ms.
"""

from __future__ import annotations

import dataclasses

from msbench.cell import Cell
from msbench.records import Metrics, Record
from workloads.base import Preset
from workloads.registry import get_workload

BASE_FIELDS = {f.name for f in dataclasses.fields(Preset)}


def preset_size(cell: Cell) -> float:
    """Sum of the preset's own numeric fields (widths, depths, resolutions), lists included."""
    preset = get_workload(cell.workload).preset(cell.preset, cell.overrides)
    total = 0.0
    for name, value in dataclasses.asdict(preset).items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if name not in BASE_FIELDS:
            total += sum(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    return total


class PresetSizeTarget:
    """`tests.msbench.asv_target:PresetSizeTarget`; amp_level=O2 halves the time, as a knob effect."""

    isolate = False

    def __init__(self, arg: str = "", accuracy: bool = False) -> None:
        self.name, self.accuracy = "tests.msbench.asv_target:PresetSizeTarget", accuracy

    def supports(self, cell: Cell) -> str | None:
        return "sink needs a device" if cell.settings.sink else None

    def run(self, cell: Cell) -> Record:
        size = preset_size(cell)
        batch = cell.settings.batch_size or get_workload(cell.workload).preset(cell.preset, cell.overrides).batch_size
        step = size * batch * 1e-6 * (0.5 if cell.settings.amp_level != "O0" else 1.0)
        metrics = Metrics(step_time_s=step, throughput=batch / step, peak_memory_bytes=int(size * batch * 4096),
                          accuracy=0.9 - (0.02 if cell.settings.amp_level == "O3" else 0.0) if self.accuracy else None)
        return Record(cell=cell, status="ok", metrics=metrics)
