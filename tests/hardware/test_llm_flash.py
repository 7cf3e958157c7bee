"""flash_attention=true on the device model: the attention core becomes FlashAttentionScore + its gradient,
costed by the 910B's flash tables fitted on public timings (hardware/calibration/flash_bench.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hardware.calibration import flash_bench
from hardware.capabilities import Facts, refusal
from hardware.model.compute import floor_seconds, flops_work, has_flash_kernel, kernels, matrix_tflops
from hardware.model.llm import flash
from hardware.model.llm.memory import FA_STAT_BYTES
from hardware.model.llm.predict import decoder_shape
from hardware.model.lowering import kernel_counts, lowered_ops, lowering_for
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.profile import load_profile
from hardware.model.outcome import predict_cell
from hardware.model.target import ModelTarget
from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.settings import make_settings
from workloads.registry import get_workload

BASE = {"mode": "graph", "sink": True, "optimizer": "adamw", "amp_level": "O2", "batch_size": 2}


def settings(**knobs):
    return make_settings({**BASE, **knobs})


def predict(workload="llama2-7b", overrides=None, **knobs):
    return predict_cell(Cell(workload=workload, overrides=overrides or {}, settings=settings(**knobs)), "ascend910b")


def fa_op(kernel=flash.FORWARD_KERNEL, b=1, a=4, s=4096, d=128):
    shape = flash.AttentionShape(batch=b, heads=a, kv_heads=a, seq=s, head_dim=d, dtype="Float16")
    like = Op("BatchMatMul", "core", (), (), 0, 0, "cube", "forward")
    return flash.fused_kernel(kernel, "forward" if kernel == flash.FORWARD_KERNEL else "backward", shape, like)


# ------------------------------------------------------------------ calibration and costing (no MindSpore)
def test_flash_table_reproduces_the_public_timings_and_reports_held_out_error():
    chip = load_profile("ascend910b")
    timings = flash_bench.measured_timings("ascend910b")
    assert len(timings) == 6 and {t.head_dim for t in timings} == {128} and flash_bench.measured_timings("ascend910a") == []
    floor = chip.kernel_classes.min_kernel_us
    table = chip.kernel_classes.flash_attention
    for t in timings:        # one timing per bin: the committed table gives each its measured time back
        assert flash_bench.predicted_seconds(t, table, chip, floor) == pytest.approx(t.time_us * 1e-6, rel=0.01)
    held = flash_bench.held_out_errors(timings, chip, floor)
    assert [t for t, _ in held] == timings and all(abs(e) > 0.01 for _, e in held)   # refitted without the row
    grad = chip.kernel_classes.flash_attention_grad
    for (g1, e1), (g2, e2) in zip(table.rows, grad.rows):
        assert g1 == g2 and e2 == pytest.approx(e1 * flash_bench.GRAD_EFFICIENCY_RATIO, rel=0.01)
    keys = {e.key for e in chip.estimates}
    assert {"kernel_classes.flash_attention", "kernel_classes.flash_attention_grad"} <= keys


def test_a_fused_kernel_costs_its_flops_at_the_flash_table():
    chip = load_profile("ascend910b")
    fwd, grad = fa_op(), fa_op(flash.BACKWARD_KERNEL)
    unmasked = 4 * 4 * 4096 * 4096 * 128
    assert fwd.flops == round(33 / 64 * unmasked) and grad.flops == 2.5 * fwd.flops    # causal: 528 of 32² blocks
    for op, table, kind in ((fwd, chip.kernel_classes.flash_attention, "flash_attention"),
                            (grad, chip.kernel_classes.flash_attention_grad, "flash_attention_grad")):
        (k,) = kernels([op], chip)
        assert k.unit == "cube" and k.kernel_class == kind
        expected = op.flops / (matrix_tflops("fp16", chip) * 1e12 * table.at(flops_work(op.flops, chip)))
        assert k.compute_s == pytest.approx(expected) and k.time_s == pytest.approx(floor_seconds(chip) + expected)
        assert not k.memory_bound               # Q, K, V, O and statistics only: no seq x seq tensor moves
    # one head at seq 8192, unmasked, is the same work as four heads at 4096 unmasked: the measured 353 us
    assert kernels([dataclasses.replace(fwd, flops=unmasked)], chip)[0].time_s == pytest.approx(353.1e-6, rel=0.02)


def test_the_causal_kernel_computes_the_blocks_on_and_below_the_diagonal():
    """n(n+1)/2 of n² blocks; a score of one block or less is computed whole (the tiny presets' seq 32)."""
    assert flash.causal_fraction(32) == flash.causal_fraction(flash.CAUSAL_BLOCK) == 1.0
    assert flash.causal_fraction(2 * flash.CAUSAL_BLOCK) == 0.75
    assert flash.causal_fraction(4096) == 33 / 64
    assert flash.causal_fraction(4096 + 1) == 34 / 66                          # a partial block is computed
    assert flash.causal_fraction(4096, block=64) == 65 / 128 and flash.causal_fraction(4096, block=512) == 9 / 16
    assert [round(flash.causal_fraction(s), 3) for s in (1024, 8192, 32768)] == [0.562, 0.508, 0.502]


def test_profiles_without_flash_tables_refuse_flash_attention():
    a, b = load_profile("ascend910a"), load_profile("ascend910b")
    assert has_flash_kernel(b) and not has_flash_kernel(a) and not has_flash_kernel(load_profile("cpu"))
    with pytest.raises(ValueError, match="no flash_attention table"):
        kernels([fa_op()], a)
    s = settings(flash_attention=True)
    assert "FlashAttentionScore" in refusal(s, "model:npu", Facts(llm_composition=True, flash_kernel=False))
    assert refusal(s, "model:npu", Facts(llm_composition=True, flash_kernel=True)) is None
    cell = Cell(workload="llama2-7b", preset="tiny", settings=s, target="model:ascend910a")
    assert "no FlashAttentionScore timing" in ModelTarget("ascend910a").supports(cell)
    assert ModelTarget("ascend910b").supports(dataclasses.replace(cell, target="model:ascend910b")) is None


def test_a_head_dimension_equal_to_the_sequence_is_refused():
    t = TensorSpec("Float16", (1, 2, 16, 16))
    qk = Op("BatchMatMul", "x/core-AttentionCore", (t, t), (t,), 2 * 16**3 * 2, 0, "cube", "forward")
    with pytest.raises(ConfigError, match="seq_len"):
        flash.attention_shape((qk,))
    with pytest.raises(ValueError, match="no materialised attention core"):
        flash.attention_shape((Op("MatMul", "x", (t,), (t,), 1, 1, "cube", "forward"),))


# ---------------------------------------------------------------- the real extracted block (MindSpore compile)
@pytest.mark.slow
@pytest.mark.parametrize("workload", ["llama2-7b", "llama2-70b"])      # multi-head, and grouped-query (8 q / 2 kv)
def test_fused_kernels_replace_exactly_the_attention_core(workload):
    block = predict(workload, tensor_parallel=1).graph.ops
    shape = flash.attention_shape(block)
    preset_heads = {"llama2-7b": (4, 4), "llama2-70b": (8, 2)}[workload]
    assert (shape.heads, shape.kv_heads, shape.seq, shape.batch) == (*preset_heads, 32, 2)
    core = flash.core_ops(block)
    fused = flash.fused_attention(block, "none")
    assert [op for op in fused if op.type.startswith("FlashAttention")] == [
        op for op in fused if op not in block]                                   # only the two kernels are new
    kept = [op for op in fused if op in block]
    assert kept == [op for op in block if op not in core]                        # every other op, in order
    assert [(op.type, op.phase) for op in fused if op not in block] == [
        (flash.FORWARD_KERNEL, "forward"), (flash.BACKWARD_KERNEL, "backward")]
    forward_bmm = [op for op in core if op.type == "BatchMatMul" and op.phase == "forward"]
    backward_bmm = [op for op in core if op.type == "BatchMatMul" and op.phase == "backward"]
    assert len(forward_bmm) == 2 and len(backward_bmm) == 4                      # QK^T, PV; dP, dV, dQ, dK
    fwd, grad = (op for op in fused if op not in block)
    assert fwd.flops == sum(op.flops for op in forward_bmm)                      # 4 b a s^2 d
    assert grad.flops == 2.5 * fwd.flops
    assert {"Softmax", "BatchMatMul"} <= {op.type for op in core}
    assert not any(t.shape == shape.score for op in fused for t in (*op.inputs, *op.outputs))
    lowered = kernel_counts(lowered_ops(fused, lowering_for(settings(), load_profile("ascend910b"))))
    assert lowered[flash.FORWARD_KERNEL] == lowered[flash.BACKWARD_KERNEL] == 1   # one of each per layer
    assert not {"BatchMatMul", "Softmax", "SoftmaxGrad"} & set(lowered)          # nothing of the core is left
    if shape.kv_heads < shape.heads:                                             # GQA: no K/V widening left
        assert not any(op.type == "BroadcastTo" and len(op.outputs[0].shape) == 5 for op in fused)
        assert fwd.inputs[1].shape == (2, 2, 32, 8)                             # tiny 70B: d 64 over 8 heads


@pytest.mark.slow
def test_recompute_follows_the_fused_kernel():
    full = flash.fused_attention(predict(recompute="full").graph.ops, "full")
    selective = flash.fused_attention(predict(recompute="selective").graph.ops, "selective")
    assert [op.phase for op in full if op.type == flash.FORWARD_KERNEL] == ["forward", "recompute"]
    assert [op.phase for op in selective if op.type == flash.FORWARD_KERNEL] == ["forward"]
    on = predict(recompute="selective", flash_attention=True).prediction
    off = predict(recompute="selective").prediction
    assert on.step_time_s < off.step_time_s


@pytest.mark.slow
def test_flash_is_faster_and_the_gap_grows_with_the_sequence():
    ratios = []
    for seq in (1024, 4096):
        on = predict(overrides={"seq_len": seq}, batch_size=1, flash_attention=True)
        off = predict(overrides={"seq_len": seq}, batch_size=1)
        assert on.graph.ops == off.graph.ops               # one extraction: the fused kernels are the model's
        ratios.append(off.prediction.step_time_s / on.prediction.step_time_s)
        if seq == 4096:
            assert on.prediction.step_time_s < off.prediction.step_time_s
            assert "kernel_classes.flash_attention" in on.prediction.detail["estimates"]
            assert "kernel_classes.flash_attention" not in off.prediction.detail["estimates"]
            assert "kernel_classes.batch_matmul" in off.prediction.detail["estimates"]
    assert ratios[0] < ratios[1]


@pytest.mark.slow
def test_memory_keeps_the_flash_rule_and_prediction_is_byte_deterministic():
    on, off = predict(flash_attention=True), predict()
    shape = decoder_shape(get_workload("llama2-7b").preset("tiny", {}))
    b, a, s = 2, shape.heads, shape.seq
    scores, stats = 2 * a * s * s * b, FA_STAT_BYTES * b * a * s           # Korthikanti's 2as^2b vs softmax stats
    diff = off.prediction.memory["activations"] - on.prediction.memory["activations"]
    assert diff == pytest.approx(shape.layers * (scores - stats), abs=4)
    again = predict(flash_attention=True)
    flash.fused_attention.cache_clear()
    assert flash.fused_attention(on.graph.ops, "none") == flash.fused_attention(again.graph.ops, "none")
    assert json.dumps(on.prediction.to_dict(), sort_keys=True) == json.dumps(again.prediction.to_dict(), sort_keys=True)
