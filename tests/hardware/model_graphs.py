"""Small hand-built OpGraphs for unit tests of the pure prediction (the product path extracts real ones)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hardware.model.host_cost import PipelineStage
from hardware.model.opgraph import DTYPE_BYTES, Op, OpGraph, TensorSpec


@dataclass(frozen=True)
class FakeHost:
    """A calibration entry of one pipeline stage: by default it scales perfectly with workers (no
    consumer cost; its Python part, if any, is GIL-serial)."""

    per_sample_s: float = 0.0
    bytes_per_sample: int = 0
    python_per_sample_s: float = 0.0
    calibration_hash: str = "fake"
    consumer_s: float = 0.0
    gil_fraction: float = 1.0

    @property
    def stages(self) -> tuple[PipelineStage, ...]:
        return (PipelineStage("map[0]", self.per_sample_s, self.python_per_sample_s),)


def tensor(shape: tuple[int, ...], dtype: str = "Float32") -> TensorSpec:
    return TensorSpec(dtype, shape)


def matmul(m: int, k: int, n: int, dtype: str = "Float32", phase: str = "forward") -> Op:
    ins = (tensor((m, k), dtype), tensor((k, n), dtype))
    out = (tensor((m, n), dtype),)
    return Op(type="MatMul", scope="Default/net/dense", inputs=ins, outputs=out, flops=2 * m * k * n,
              bytes=sum(t.nbytes for t in ins + out), unit="cube", phase=phase)


def elementwise(shape: tuple[int, ...], dtype: str = "Float32", phase: str = "forward",
                kind: str = "ReLU", group: int | None = None) -> Op:
    t = tensor(shape, dtype)
    return Op(type=kind, scope=f"Default/net/{kind}", inputs=(t,), outputs=(t,), flops=t.elements,
              bytes=2 * t.nbytes, unit="vector", phase=phase, fusion_group=group)


def graph(ops: list[Op], batch: int = 32, params: int = 1_000_000, activations: int = 0,
          grad_accum: int = 1, **meta: Any) -> OpGraph:
    return OpGraph(workload="hand", preset="test", batch_size=batch, grad_accum=grad_accum, ops=tuple(ops),
                   param_count=params, param_bytes=params * DTYPE_BYTES["Float32"],
                   activation_bytes=activations, meta=dict(meta))


def mlp_step(batch: int, width: int = 1024, layers: int = 4, dtype: str = "Float32") -> OpGraph:
    """A training step of an MLP: per layer a forward matmul + ReLU, two backward matmuls, an update."""
    ops: list[Op] = []
    for _ in range(layers):
        ops += [matmul(batch, width, width, dtype), elementwise((batch, width), dtype)]
    for _ in range(layers):
        ops += [elementwise((batch, width), dtype, "backward", "ReluGrad"),
                matmul(batch, width, width, dtype, "backward"), matmul(width, batch, width, dtype, "backward")]
    ops += [elementwise((width, width), "Float32", "optimizer", "ApplyMomentum") for _ in range(layers)]
    kept = layers * 2 * batch * width * (2 if dtype == "Float16" else 4)
    return graph(ops, batch=batch, params=layers * width * width, activations=kept)


def flops_of(g: OpGraph) -> int:
    return sum(op.flops for op in g.ops)


def elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def many_small(n: int, shape: tuple[int, ...] = (64, 64)) -> OpGraph:
    """A step of `n` tiny elementwise kernels: dispatch-bound everywhere."""
    return graph([elementwise(shape) for _ in range(n)])


def fake_modes(**changes):
    """A calibrated pipeline-modes entry (hardware/model/pipeline_modes.py) with distinct ratios and a vision
    stage, so each pipeline knob moves the prediction."""
    from hardware.model.pipeline_modes import PipelineModes

    values = dict(process_ratio={1: 0.8, 2: 0.7}, process_no_shm_ratio={1: 1.1, 2: 1.05},
                  vision_shares={"Decode": 0.5, "Normalize": 0.1}, stored_pixels=500 * 375,
                  output_pixels=224 * 224, compile_s_per_op=0.01, calibration_hash="fake-modes")
    return PipelineModes(**{**values, **changes})

