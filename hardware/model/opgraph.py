"""OpGraph: the ops of one real training step (forward, backward, optimizer) with shapes and dtypes.

Produced by `hardware.model.graph` from the workload's real MindSpore step builder (never typed by
hand); consumed by the pure prediction functions. Plain data so it can be cached as JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

DTYPE_BYTES = {"Float32": 4, "Float16": 2, "BFloat16": 2, "Float64": 8, "Int32": 4, "Int64": 8,
               "Int16": 2, "Int8": 1, "UInt8": 1, "Bool": 1}


@dataclass(frozen=True)
class TensorSpec:
    dtype: str               # MindSpore IR spelling: Float32, Float16, Int32, ...
    shape: tuple[int, ...]

    # Cached per tensor (outside the dataclass fields, so never in to_dict): the device model reads each
    # several times per kernel, for every kernel of every cell.
    @cached_property
    def elements(self) -> int:
        return math.prod(self.shape) if self.shape else 1

    @cached_property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES.get(self.dtype, 4)

    # The dataclass's own hash (of the field tuple), computed once: ops and their tensors key the costed-kernel
    # memo (hardware.model.compute.kernels), looked up for every kernel of every prediction.
    @cached_property
    def _hash(self) -> int:
        return hash((self.dtype, self.shape))

    def __hash__(self) -> int:
        return self._hash

    def __getstate__(self) -> dict[str, Any]:  # a string's hash differs between processes: never pickle it
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Op:
    """One kernel of the final kernel graph."""

    type: str                          # Conv2D, MatMul, BatchMatMul, Cast, ApplyMomentum, ...
    scope: str                         # full scope name (Default/network-.../Gradients/...)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    flops: int                         # 2*MAC for matrix ops, ~1 per output element otherwise
    bytes: int                         # bytes read + written if nothing stays on chip
    unit: str                          # "cube" (matrix engine) or "vector"
    phase: str                         # "forward" | "backward" | "optimizer" | "recompute"
    fusion_group: int | None = None    # set when graph_kernel/O1 fuses elementwise chains

    @cached_property
    def _hash(self) -> int:                # as TensorSpec's: the field tuple's hash, once
        return hash((self.type, self.scope, self.inputs, self.outputs, self.flops, self.bytes, self.unit,
                     self.phase, self.fusion_group))

    def __hash__(self) -> int:
        return self._hash

    def __getstate__(self) -> dict[str, Any]:  # a string's hash differs between processes: never pickle it
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class OpGraph:
    """A whole training step as compiled by MindSpore for one cell (batch, AMP level, recompute...)."""

    workload: str
    preset: str
    batch_size: int                    # per-device micro-batch the graph was compiled for
    grad_accum: int
    ops: tuple[Op, ...]
    param_count: int                   # trainable parameters of the network
    param_bytes: int                   # as stored (fp32 Parameters under MindSpore AMP)
    activation_bytes: int              # forward outputs kept for backward (after recompute)
    key: str = ""                      # content key of the extraction (cache key)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OpGraph":
        def spec(t: Any) -> TensorSpec:
            return TensorSpec(t["dtype"], tuple(t["shape"]))

        ops = tuple(Op(**{**o, "inputs": tuple(spec(t) for t in o["inputs"]),
                         "outputs": tuple(spec(t) for t in o["outputs"])}) for o in data["ops"])
        return cls(**{**data, "ops": ops})
