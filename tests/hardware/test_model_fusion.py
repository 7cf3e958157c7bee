"""The graph-kernel fusion rule on hand-made graphs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.model.fusion import apply_fusion, fusion_groups  # noqa: E402
from hardware.model.opgraph import Op, TensorSpec  # noqa: E402
from model_graphs import elementwise, graph, matmul  # noqa: E402

SHAPE = (32, 64)


def reduce_sum(shape=SHAPE, phase="forward") -> Op:
    x, y = TensorSpec("Float32", shape), TensorSpec("Float32", shape[:1])
    return Op(type="ReduceSum", scope="Default/net/sum", inputs=(x,), outputs=(y,), flops=x.elements,
              bytes=x.nbytes + y.nbytes, unit="vector", phase=phase)


def test_elementwise_chain_fuses_and_matmul_breaks_it():
    ops = [matmul(32, 16, 64), elementwise(SHAPE, kind="BiasAdd"), elementwise(SHAPE, kind="ReLU"),
           elementwise(SHAPE, kind="Mul"), matmul(32, 64, 64), elementwise(SHAPE, kind="Add")]
    assert fusion_groups(ops) == [None, 0, 0, 0, None, None]


def test_reduce_ends_a_chain():
    ops = [elementwise(SHAPE, kind="Sub"), elementwise(SHAPE, kind="Exp"), reduce_sum(),
           elementwise((32,), kind="Log"), elementwise((32,), kind="Neg")]
    assert fusion_groups(ops) == [0, 0, 0, 1, 1]


def test_no_fusion_across_phases_shapes_or_unknown_ops():
    across_phase = [elementwise(SHAPE, kind="ReLU"), elementwise(SHAPE, kind="ReluGrad", phase="backward")]
    unrelated = [elementwise(SHAPE, kind="ReLU"), elementwise((7, 7), kind="ReLU")]
    unknown = [elementwise(SHAPE, kind="ReLU"), elementwise(SHAPE, kind="Transpose"), elementwise(SHAPE, kind="Add")]
    optimizer = [elementwise(SHAPE, kind="ApplyMomentum", phase="optimizer")] * 2
    for ops in (across_phase, unrelated, unknown, optimizer):
        assert fusion_groups(ops) == [None] * len(ops)


def test_apply_fusion_marks_ops_and_counts_kernels():
    g = graph([elementwise(SHAPE, kind="Add"), elementwise(SHAPE, kind="ReLU"), matmul(32, 64, 8),
               elementwise((32, 8), kind="Sigmoid"), elementwise((32, 8), kind="Mul")])
    fused = apply_fusion(g)
    assert [op.fusion_group for op in fused.ops] == [0, 0, None, 1, 1]
    assert fused.meta["fusion"] == {"groups": 2, "fused_ops": 4, "kernels": 3}
    assert [op.fusion_group for op in g.ops] == [None] * 5          # the input graph is untouched
    assert apply_fusion(g) == fused                                  # pure
