"""The kernel-graph IR parser and data flow, on real dumps of a small network compiled here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hardware.model.dataflow import analyse, peak_live, tuple_index
from hardware.model.extract import DUMP_PASS, dump_env
from msbench.child_io import child_env
from hardware.model.ir import IrGraph, IrNode, parse_abstract, read_dumps, split_args, split_abstracts
from hardware.model.opgraph import TensorSpec

# A conv block, a Dense layer (MatMul with transpose_b) and a BatchMatMul with transpose_a, trained
# one step with nn.Momentum; argv[1] picks plain / recompute (the block) / o2 (AMP).
NET = """
import sys, numpy as np, mindspore as ms
from mindspore import nn, ops
ms.set_device('CPU'); ms.set_context(mode=ms.GRAPH_MODE)
class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, pad_mode='pad', padding=1, has_bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))
class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block = Block(); self.flat = nn.Flatten(); self.fc = nn.Dense(8 * 16 * 16, 10)
        self.bmm = ops.BatchMatMul(transpose_a=True)
    def construct(self, x):
        y = self.fc(self.flat(self.block(x)))
        z = y.reshape(2, 2, 10)
        return y + self.bmm(z, z).sum()
net = Net()
if sys.argv[1] == 'recompute':
    net.block.recompute()
if sys.argv[1] == 'o2':
    net = ms.amp.auto_mixed_precision(net, 'O2')
step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), nn.Momentum(net.trainable_params(), 0.01, 0.9))
step.set_train(True)
step.compile(ms.Tensor(np.zeros((4, 3, 16, 16), np.float32)), ms.Tensor(np.zeros((4,), np.int32)))
"""
CONV_FLOPS = 2 * (4 * 8 * 16 * 16) * (3 * 3 * 3)     # 2 x outputs x (Cin kh kw)
DENSE_FLOPS = 2 * (4 * 10) * 2048                    # (4, 2048) @ (10, 2048)^T
BMM_FLOPS = 2 * (2 * 10 * 10) * 2                    # (2, 2, 10)^T @ (2, 2, 10): K = 2, not 10
PARAMS = 8 * 3 * 3 * 3 + 8 + 8 + 10 * 2048 + 10


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, list[Path]]:
    """Real final-graph dumps of the three variants (compile only, in child processes)."""
    out = {}
    for variant in ("plain", "recompute", "o2"):
        work = tmp_path_factory.mktemp(variant)
        (work / "net.py").write_text(NET)            # MindSpore parses construct() from a source file
        proc = subprocess.run([sys.executable, "net.py", variant], cwd=work,
                              env=child_env(compile_clean=True, extra=dump_env(work / "ir")),
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[variant] = sorted((work / "ir").glob(f"{DUMP_PASS}_*.ir"))
        assert out[variant], f"no dump for {variant}"
    return out


def test_abstracts_tensor_ref_tuple_and_scalars():
    assert parse_abstract("Tensor[Float32], (4, 3, 16, 16)") == (TensorSpec("Float32", (4, 3, 16, 16)),)
    assert parse_abstract("Ref[Tensor[Float16]], (8), ref_key=b.w, is_parameter") == (TensorSpec("Float16", (8,)),)
    assert parse_abstract("Tuple[Tensor[Float32]*2,Tensor[Int32]], TupleShape((2, 3), (), (5))") == (
        TensorSpec("Float32", (2, 3)), TensorSpec("Float32", ()), TensorSpec("Int32", (5,)))
    assert parse_abstract("Bool, NoShape") == ()
    assert parse_abstract("Tuple[Int64*2], TupleShape(NoShape, NoShape)") == ()
    ins, outs = split_abstracts(" (<Tensor[Float32], (2)>, <UMonad, NoShape>) -> (<Tensor[Float16], ()>)")
    assert ins == ["Tensor[Float32], (2)", "UMonad, NoShape"] and outs == ["Tensor[Float16], ()"]


def test_args_with_nested_constants():
    args, attrs = split_args("%1, Tensor(shape=[4], dtype=Int64, value=[8 3 3 3]), (I64(1), I64(2)), Bool(1)) "
                             "primitive_attrs: {a: (1)}")
    assert args == ["%1", "Tensor(shape=[4], dtype=Int64, value=[8 3 3 3])", "(I64(1), I64(2))", "Bool(1)"]
    assert attrs.strip().startswith("primitive_attrs")


def test_peak_live_counts_overlap_only():
    assert peak_live([(0, 5, 10), (1, 3, 5), (4, 6, 7)]) == 17
    assert peak_live([]) == 0


def test_tuple_index_reads_the_typed_constant():
    assert tuple_index("I64(1)") == 1 and tuple_index("I64(0)") == 0 and tuple_index("3") == 3


@pytest.mark.slow
def test_only_the_outputs_backward_reads_are_kept(dumps):
    """BatchNormGrad reads the batch statistics (TupleGetItem 3, 4), not the normalised output (0), which
    only the forward ReLU reads: the output is no kept activation."""
    kept = analyse(read_dumps(dumps["plain"])).meta["kept_activations"]
    bn = {index for producer, index, *_ in kept if producer == "BatchNorm"}
    assert bn and 0 not in bn


@pytest.mark.slow
def test_flops_match_analytic_values(dumps):
    ops = analyse(read_dumps(dumps["plain"])).ops
    assert not any(op.type.startswith("PrimFunc_") for op in ops)
    forward_cube = sorted(op.flops for op in ops if op.unit == "cube" and op.phase == "forward")
    assert forward_cube == sorted([CONV_FLOPS, DENSE_FLOPS, BMM_FLOPS])
    (dw,) = [op for op in ops if op.type == "Conv2DBackpropFilter"]
    assert dw.flops == CONV_FLOPS and dw.phase == "backward"
    backward_matmuls = [op.flops for op in ops if op.type == "MatMul" and op.phase == "backward"]
    assert backward_matmuls == [DENSE_FLOPS, DENSE_FLOPS]
    (bn,) = [op for op in ops if op.type == "BatchNorm"]
    assert len(bn.outputs) == 5 and bn.outputs[0] == TensorSpec("Float32", (4, 8, 16, 16))
    assert bn.bytes == sum(t.nbytes for t in bn.inputs + bn.outputs)


@pytest.mark.slow
def test_phases_and_weights(dumps):
    result = analyse(read_dumps(dumps["plain"]))
    phases = {op.phase for op in result.ops}
    assert phases == {"forward", "backward", "optimizer"}
    assert sum(op.type == "ApplyMomentum" and op.phase == "optimizer" for op in result.ops) == 5
    trainable = {"block.conv.weight", "block.bn.gamma", "block.bn.beta", "fc.weight", "fc.bias"}
    assert sum(p.spec.elements for p in result.weight_params if p.ref_key in trainable) == PARAMS
    # The forward conv output is read by the BatchNorm gradient: it is an activation kept for backward.
    assert result.activation_bytes >= 4 * 8 * 16 * 16 * 4


def kernel(key: str, op_type: str, scope: str, *args: str) -> IrNode:
    spec = (TensorSpec("Float32", (4, 8)),)
    return IrNode(key=key, type=op_type, scope=scope, args=args, consts=args, in_specs=tuple(spec for _ in args),
                  out_specs=spec, attrs="")


def test_a_gradient_sum_that_backward_reads_again_is_backward_not_update_work():
    """An activation read twice gets its two gradients summed; under a bare scope (as mindyolo's YOLOv8
    compiles them) the data flow alone would call that sum update work. Backward reads it, so it is
    backward; the accumulation that only the optimizer reads stays update work."""
    nodes = (kernel("%1", "Mul", "Default/network/Mul-op1"),
             kernel("%2", "MulGrad", "Gradients/Default/network/gradMul/Mul-op2", "%1"),
             kernel("%3", "MulGrad", "Gradients/Default/network/gradMul/Mul-op3", "%1"),
             kernel("%4", "AddN", "Default", "%2", "%3"),
             kernel("%5", "Neg", "Default", "%4"),
             kernel("%6", "ReluGrad", "Gradients/Default/network/gradReLU/ReluGrad-op4", "%5", "%1"),
             kernel("%7", "AddN", "Default", "%6", "%6"),
             kernel("%8", "ApplyMomentum", "Default/optimizer-Momentum/ApplyMomentum-op5", "%7"))
    phases = [op.phase for op in analyse(IrGraph(params=(), nodes=nodes)).ops]
    assert phases == ["forward", "backward", "backward", "backward", "backward", "backward", "optimizer", "optimizer"]


@pytest.mark.slow
def test_recompute_ops_and_lower_activations(dumps):
    plain, recomputed = analyse(read_dumps(dumps["plain"])), analyse(read_dumps(dumps["recompute"]))
    extra = [op for op in recomputed.ops if op.phase == "recompute"]
    assert extra and all(op.scope.startswith("recompute_") for op in extra)
    assert any(op.type == "Conv2D" for op in extra)
    assert recomputed.activation_bytes < plain.activation_bytes


@pytest.mark.slow
def test_amp_o2_casts_and_fp16_matrix_ops(dumps):
    plain, o2 = analyse(read_dumps(dumps["plain"])), analyse(read_dumps(dumps["o2"]))
    casts = lambda a: sum(op.type == "Cast" for op in a.ops)  # noqa: E731
    assert casts(o2) > casts(plain)
    for op in o2.ops:
        if op.type in ("Conv2D", "MatMul", "BatchMatMul"):
            assert op.inputs[0].dtype == "Float16" and op.outputs[0].dtype == "Float16", op
    # The CPU backend runs fp16 convs through fp32 kernels wrapped in casts: tallied, not ops.
    assert o2.meta["backend_casts"] and not plain.meta["backend_casts"]
