"""The ops of one LLM optimizer step on one card, composed from the block and the ends as `compose` costs them:
what a profiler output of that card is joined to (`msbench calibrate ascend`, hardware/calibration/
profiler_join.py).

Per micro-batch (micro_batches x grad_accum of them) the card runs the ends' forward, every block's forward,
the ends' backward, then every block's recompute and backward; once per step the blocks' and the ends'
optimizer updates. Each copy of a part gets fusion groups of its own, so that copies stay separate kernels. Only
a layout without pipeline stages is composed: `compose` does not split the ends between the first and the last
stage by scope, so a pipelined card's ends are not known kernel by kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from hardware.model.llm.extraction import LlmGraphs, part_ops
from hardware.model.opgraph import Op
from hardware.model.profile import HardwareProfile
from msbench.errors import ConfigError
from msbench.settings import Settings

def rank_step_ops(graphs: LlmGraphs, layers: int, settings: Settings, profile: HardwareProfile) -> list[Op]:
    """The lowered ops of one optimizer step on a card holding all `layers` blocks and both ends, in launch order
    as far as the composition knows it."""
    if settings.pipeline_stages != 1:
        raise ConfigError("pipeline_stages", settings.pipeline_stages, "1 (a pipelined card holds part of the "
                          "ends, which the LLM composition does not split kernel by kernel)")
    block = part_ops(graphs.block, settings, profile, fused_attention=settings.flash_attention)
    ends = part_ops(graphs.ends, settings, profile)
    copies = Copies()
    step: list[Op] = []
    for _ in range(settings.micro_batches * settings.grad_accum):
        step += copies.of(phase(ends, "forward"))
        for _ in range(layers):
            step += copies.of(phase(block, "forward"))
        step += copies.of(phase(ends, "recompute", "backward"))
        for _ in range(layers):
            step += copies.of(phase(block, "recompute", "backward"))
    for _ in range(layers):
        step += copies.of(phase(block, "optimizer"))
    step += copies.of(phase(ends, "optimizer"))
    return step


def phase(ops: Iterable[Op], *phases: str) -> list[Op]:
    return [op for op in ops if op.phase in phases]


class Copies:
    """Copies of parts' ops whose fusion groups never meet another copy's (group_ops merges ops by group id)."""

    def __init__(self) -> None:
        self.next_group = 0

    def of(self, ops: Sequence[Op]) -> list[Op]:
        groups = sorted({op.fusion_group for op in ops if op.fusion_group is not None})
        renumber = {g: self.next_group + i for i, g in enumerate(groups)}
        self.next_group += len(groups)
        return [op if op.fusion_group is None else dataclasses.replace(op, fusion_group=renumber[op.fusion_group])
                for op in ops]
