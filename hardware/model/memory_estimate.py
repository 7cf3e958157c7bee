"""One type for a predicted step's device memory, whichever path estimated it.

The graph path (CNN and Transformer training: memory.py), forward-only inference (inference.py) and the
LLM composition (llm/memory.py) each fill the same named components, so a component means one thing in
every record's `peak_memory_detail` and every reader (report claims, fitting) finds it under one name.
A component a path does not model is None and stays out of `to_dict`: each path's records keep the
component set they always had (the LLM composition has no accumulation buffer or sink queue in its
accounting; the graph path has no all-gathered transient).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

STAGES = ("only", "first", "last")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per component on the fullest card; they add up to `peak`."""

    params: int
    grads: int                         # graph path: beyond the activation memory backward frees; LLM: the shard's
    optimizer_states: int              # and every other persistent weight (BN statistics, loss scale)
    activations: int
    workspace: int
    fragmentation: int
    capacity: int                      # the OOM threshold, not a component
    accumulation: int | None = None    # the gradient-accumulation buffer (graph path)
    data_queue: int | None = None      # the dataset-sink device queue (graph path)
    transient: int | None = None       # one layer's all-gathered weights and full gradient (LLM, optimizer_shard)
    stage: str = "only"                # the fullest pipeline stage: only (no pipeline) | first | last

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"MemoryEstimate.stage: {self.stage!r} is not one of {', '.join(STAGES)}")

    def components(self) -> dict[str, int]:
        """The modelled components by name (those not None), in declaration order."""
        skip = ("capacity", "stage")
        return {f.name: value for f in fields(self)
                if f.name not in skip and (value := getattr(self, f.name)) is not None}

    @property
    def peak(self) -> int:
        return sum(self.components().values())

    @property
    def oom(self) -> bool:
        return self.peak > self.capacity

    def to_dict(self) -> dict[str, int]:
        return self.components()
