"""A device-model cell resolved once, at the door: everything its prediction reads besides the extracted
graph and the calibrated host cost. Every later step takes the plan, never the cell's loose strings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from hardware.capabilities import Facts
from hardware.model.compile_mode import CompileMode, compile_mode
from hardware.model.compute import has_flash_kernel
from workloads.transformer.config import is_llm_preset
from hardware.model.profile import HardwareProfile, load_profile
from msbench.cell import Cell
from msbench.settings import Settings
from workloads.registry import calibration_entry, get_workload
from workloads.train_step import steps_per_epoch
from workloads.pipeline import ragged_last_batch


@dataclass(frozen=True)
class CellPlan:
    cell: Cell
    profile: HardwareProfile
    workload: Any                      # the workload object (workloads.base.Workload or a zoo adapter)
    spec: Any                          # its preset with the cell's overrides applied
    llm: bool                          # a decoder-only LLM composed from one extracted block (hardware/model/llm)
    compile: CompileMode
    accuracy: bool = False             # the target also runs the real tiny-preset accuracy (a refusal fact)
    steps_per_epoch: int | None = None     # None for an LLM composition (no epoch is modelled)
    ragged_last_batch: bool | None = None
    # the host-cost entry that measured this cell's pipeline: (workload, preset, overrides); None for an LLM
    calibration: tuple[str, str, Mapping[str, Any]] | None = field(default=None)

    @property
    def settings(self) -> Settings:
        return self.cell.settings

    @property
    def kind(self) -> str:
        """The capability table's kind: `model:npu` or `model:cpu`, by the profile."""
        return f"model:{self.profile.profile.kind}"

    def facts(self, marked_blocks: int | None = None, vision_ops: bool | None = None,
              ragged: bool | None = None) -> Facts:
        """What the capability table may refuse on; `marked_blocks`, `ragged` and `vision_ops` are known
        once the graph is extracted and the host cost read (None before: an unknown fact never refuses)."""
        p = self.profile
        return Facts(ragged_last_batch=ragged, device_vision_ops=vision_ops, accuracy=self.accuracy,
                     profile_sinks=p.launch.supports_sink, host_is_device=p.host.shares_device,
                     marked_blocks=marked_blocks, usable_gib=p.memory.usable_gib,
                     fragmentation=p.memory.fragmentation, llm_composition=self.llm,
                     flash_kernel=has_flash_kernel(p))


def resolve(cell: Cell, profile: HardwareProfile | str, *, accuracy: bool = False) -> CellPlan:
    """The cell on a profile (an object or a name: the cell's own target need not be that profile, as when
    `msbench validate` predicts a cell measured on `mindspore:cpu`). A bad preset or override raises here."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    workload = get_workload(cell.workload)
    spec = workload.preset(cell.preset, cell.overrides)
    llm = is_llm_preset(spec)
    base = CellPlan(cell=cell, profile=prof, workload=workload, spec=spec, llm=llm,
                    compile=compile_mode(cell.settings, prof), accuracy=accuracy)
    if llm:
        return base
    return dataclasses.replace(base, calibration=calibration_entry(cell.workload, cell.preset, cell.overrides or {}),
                               steps_per_epoch=steps_per_epoch(spec, cell.settings),
                               ragged_last_batch=ragged_last_batch(spec, cell.settings))
