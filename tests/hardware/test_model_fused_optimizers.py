"""nn.Lamb on Ascend: the generic per-parameter update becomes Ascend's Lamb kernels (hardware/model/fused_optimizers.py)."""

from __future__ import annotations

import dataclasses

from hardware.model.compute import kernels
from hardware.model.fused_optimizers import fuse_lamb
from hardware.model.lowering import kernel_counts, lower
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.profile import load_profile
from model_graphs import graph  # noqa: E402
from msbench.settings import Settings

NPU, CPU = load_profile("ascend910a"), load_profile("cpu")
SETTINGS = Settings(mode="graph", jit_level="O2", optimizer="lamb")
LAMB = "Default/optimizer-Lamb"


def op(kind: str, shape: tuple[int, ...], scope: str = LAMB, phase: str = "optimizer") -> Op:
    x = TensorSpec("Float32", shape)
    return Op(type=kind, scope=scope, inputs=(x, x), outputs=(x,), flops=x.elements,
              bytes=3 * x.nbytes, unit="vector", phase=phase)


def generic_lamb_step() -> list[Op]:
    """A forward op, then the generic update of two parameters ((64, 32) and (32,)): per parameter three
    Assigns (m, v, the parameter) among elementwise ops, one Add under a layer's scope, the schedule."""
    ops = [op("MatMul", (8, 64), "Default/net/dense", "forward"),
           op("Pow", (), f"{LAMB}/learning_rate-PolynomialDecayLR")]
    for shape in ((64, 32), (32,)):
        ops += [op("Mul", shape), op("Add", shape, "Default/net/embeddings"), op("Square", shape),
                op("Sqrt", shape), op("Div", shape), op("Assign", shape), op("Assign", shape),
                op("Select", shape), op("Assign", shape)]
    return ops + [op("AssignAdd", (1,))]


def test_lamb_update_becomes_ascend_kernels_per_parameter():
    lowered = lower(graph(generic_lamb_step()), SETTINGS, NPU).ops
    counts = kernel_counts(lowered)
    assert counts["LambApplyOptimizerAssign"] == 2 and counts["LambApplyWeightAssign"] == 2
    assert counts["SquareSumV1"] == 4 and counts["Sqrt"] == 4          # the weight and update norms
    for generic in ("Mul", "Add", "Square", "Div", "Assign", "Select"):
        assert counts[generic] == 0, generic
    assert counts["Pow"] == 1 and counts["AssignAdd"] == 1 and counts["MatMul"] == 1   # schedule, step, forward


def test_lamb_kernels_move_each_parameter_twelve_times():
    """LambApplyOptimizerAssign reads g, v, m, w and writes update, v, m; the norms read w and the update;
    LambApplyWeightAssign reads the update and w and writes w: 12 parameter-sized fp32 passes."""
    lowered = lower(graph(generic_lamb_step()), SETTINGS, NPU).ops
    lamb_bytes = sum(o.bytes for o in lowered if o.type.startswith("Lamb") or o.type == "SquareSumV1")
    params = (64 * 32 + 32) * 4
    assert lamb_bytes - 12 * params == 2 * (8 + 2 + 3) * 4      # + per parameter 8 hyper-parameters, 2 norms, 3 scalars read


def test_lamb_lowering_is_npu_only_and_costs_less_than_the_generic_update():
    g = graph(generic_lamb_step())
    assert lower(g, SETTINGS, CPU) is g
    generic = dataclasses.replace(g, meta={**g.meta, "lowering": {}})       # the CPU kernels costed on the NPU
    fused = lower(g, SETTINGS, NPU)
    assert sum(k.time_s for k in kernels(fused.ops, NPU)) < sum(k.time_s for k in kernels(generic.ops, NPU))


def test_a_step_without_lamb_is_left_alone():
    ops = [o for o in generic_lamb_step() if LAMB not in o.scope or "learning_rate" in o.scope]
    assert fuse_lamb(ops) == ops


def overflow_test(shape: tuple[int, ...]) -> list[Op]:
    """amp.all_finite off Ascend, for one gradient: IsFinite, all(), a cast and 1 - status."""
    grad, flags, flag = TensorSpec("Float32", shape), TensorSpec("Bool", shape), TensorSpec("Bool", ())
    count, one = TensorSpec("Int64", ()), TensorSpec("Int64", ())

    def k(kind: str, ins, outs) -> Op:
        return Op(type=kind, scope="Default", inputs=tuple(ins), outputs=tuple(outs), flops=1,
                  bytes=sum(t.nbytes for t in (*ins, *outs)), unit="vector", phase="optimizer")
    return [k("IsFinite", (grad,), (flags,)), k("ReduceAll", (flags,), (flag,)), k("Cast", (flag,), (count,)),
            k("Sub", (one, count), (count,))]


def test_the_overflow_check_reads_the_float_status_not_every_gradient():
    scale = TensorSpec("Float32", ())
    keep = Op(type="IsFinite", scope="Default", inputs=(scale,), outputs=(TensorSpec("Bool", ()),), flops=1,
              bytes=5, unit="vector", phase="optimizer")               # the loss scale's own test stays
    step = [op("Mul", (64, 32), "Default"), *overflow_test((64, 32)), *overflow_test((32,)), keep,
            op("Sub", (), "Default")]
    counts = kernel_counts(lower(graph(step), Settings(mode="graph", jit_level="O0"), NPU).ops)
    assert counts["IsFinite"] == 1 and counts["ReduceAll"] == 0 and counts["Cast"] == 0
    assert counts["Sub"] == 1 and counts["Mul"] == 1                # a Sub that reads no test result stays
    assert lower(graph(step), SETTINGS, CPU).ops == tuple(step)
