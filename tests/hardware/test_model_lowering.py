"""The Ascend lowering: hand-built steps for each rule, and the real ResNet-50 / BERT-base steps against the
kernel counts of the public Ascend 910 per-op profiles (hardware/calibration/ascend_kernel_counts.toml)."""

from __future__ import annotations

import csv
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from hardware.model.lowering import kernel_counts, lower
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.profile import load_profile
from model_graphs import graph  # noqa: E402
from msbench.settings import Settings, make_settings

NPU, CPU = load_profile("ascend910a"), load_profile("cpu")
O2, O0 = Settings(mode="graph", jit_level="O2"), Settings(mode="graph", jit_level="O0")
COUNTS = Path(__file__).resolve().parents[2] / "hardware" / "calibration" / "ascend_kernel_counts.toml"
DOCS18 = COUNTS.parent / "data" / "docs18_resnet50_ops.csv"


def t(*shape: int, dtype: str = "Float16") -> TensorSpec:
    return TensorSpec(dtype, shape)


def op(kind: str, ins, outs, phase: str = "forward", unit: str = "vector") -> Op:
    return Op(type=kind, scope=f"Default/net/{kind}", inputs=tuple(ins), outputs=tuple(outs), flops=1000,
              bytes=sum(x.nbytes for x in (*ins, *outs)), unit=unit, phase=phase)


def conv_bn_relu_step() -> list[Op]:
    """x -> Conv2D -> BatchNorm -> ReLU, and its backward (ReluGrad, BatchNormGrad, dX, dW)."""
    x, w, y, c = t(8, 64, 56, 56), t(64, 64, 1, 1), t(8, 64, 56, 56), t(64, dtype="Float32")
    return [op("Conv2D", (x, w), (y,), unit="cube"), op("BatchNorm", (y, c, c, c, c), (y, c, c, c, c)),
            op("ReLU", (y,), (y,)),
            op("ReluGrad", (y, y), (y,), "backward"), op("BatchNormGrad", (y, y, c, c, c), (y, c, c), "backward"),
            op("Conv2DBackpropInput", (y, w), (x,), "backward", "cube"),
            op("Conv2DBackpropFilter", (y, x), (w,), "backward", "cube")]


def test_cpu_keeps_its_kernels():
    g = graph(conv_bn_relu_step())
    assert lower(g, O2, CPU) is g


def test_o2_fuses_conv_bn_relu_and_their_gradients_as_the_profile():
    counts = kernel_counts(lower(graph(conv_bn_relu_step()), O2, NPU).ops)
    assert counts["FusionOp_Conv2D_BNTrainingReduce"] == 1
    assert counts["FusionOp_BNTrainingUpdate_ReLUV2"] == 1
    assert counts["BNTrainingUpdateGrad"] == 1 and counts["FusedDbnDw"] == 1      # 1x1 conv at 56x56
    assert "BatchNorm" not in counts and "ReLU" not in counts


def test_lowering_twice_changes_nothing():
    once = lower(graph(conv_bn_relu_step()), O2, NPU)
    assert lower(once, O2, NPU) is once


def test_o0_splits_but_does_not_fuse():
    counts = kernel_counts(lower(graph(conv_bn_relu_step()), O0, NPU).ops)
    assert not [k for k in counts if k.startswith("FusionOp_") or k.startswith("Fused")]
    assert counts["BNTrainingReduce"] == counts["BNTrainingUpdate"] == 1
    assert counts["ReLUV2"] == counts["ReluGradV2"] == 1


def test_relu_grad_reads_a_bitmask_not_the_output():
    lowered = lower(graph(conv_bn_relu_step()), O0, NPU).ops
    grad = next(o for o in lowered if o.type == "ReluGradV2")
    mask = grad.inputs[1]
    assert mask.dtype == "UInt8" and mask.nbytes * 8 == 8 * 64 * 56 * 56      # one bit per element


def test_atomic_clean_before_accumulating_kernels_and_its_size():
    lowered = lower(graph(conv_bn_relu_step()), O0, NPU).ops
    cleans = [i for i, o in enumerate(lowered) if o.type == "AtomicAddrClean"]
    after = {lowered[i + 1].type for i in cleans}
    assert {"BNTrainingReduce", "Conv2DBackpropFilter", "BNTrainingUpdateGrad"} <= after
    dw = next(o for o in lowered if o.type == "Conv2DBackpropFilter")
    assert lowered[lowered.index(dw) - 1].outputs == dw.outputs           # it zeroes the weight gradient


def test_transdata_pads_the_image_channels_to_16():
    image, w, y = t(8, 3, 224, 224), t(64, 3, 7, 7), t(8, 64, 112, 112)
    g = graph([op("Cast", (t(8, 3, 224, 224, dtype="Float32"),), (image,)), op("Conv2D", (image, w), (y,), unit="cube")])
    lowered = lower(g, O2, NPU).ops
    trans = [o for o in lowered if o.type == "TransData"]
    assert len(trans) == 1 and trans[0].outputs[0].shape == (8, 16, 224, 224)
    assert trans[0].bytes == image.nbytes + trans[0].outputs[0].nbytes


def test_folded_cast_leaves_the_narrow_tensor():
    x, wide = t(8, 64, 56, 56), t(8, 64, 56, 56, dtype="Float32")
    c = t(64, dtype="Float32")
    g = graph([op("Conv2D", (x, t(64, 64, 1, 1)), (x,), unit="cube"), op("Cast", (x,), (wide,)),
               op("BatchNorm", (wide, c, c, c, c), (wide, c, c, c, c))])
    lowered = lower(g, O0, NPU).ops
    assert "Cast" not in {o.type for o in lowered}
    assert next(o for o in lowered if o.type == "BNTrainingReduce").inputs[0] == x


def test_fp32_convolution_runs_in_fp16_between_five_casts_on_the_910a():
    """O0 on a chip without an fp32 Cube: each distinct fp32 tensor of a convolution is cast once (the
    forward's input and output, the input gradient's incoming gradient and result, the weight gradient)."""
    step = [replace(o, inputs=tuple(TensorSpec("Float32", x.shape) for x in o.inputs),
                    outputs=tuple(TensorSpec("Float32", x.shape) for x in o.outputs)) for o in conv_bn_relu_step()]
    lowered = lower(graph(step), O0, NPU).ops
    casts = [o for o in lowered if o.type == "Cast"]
    assert len(casts) == 5
    assert all(x.dtype == "Float16" for o in lowered if o.unit == "cube"
               for x in (o.inputs[:1] if o.type != "Conv2DBackpropFilter" else o.inputs) + o.outputs)
    assert next(o for o in lowered if o.type == "Conv2D").inputs[1].dtype == "Float32"    # weights: no Cast kernel
    assert "Cast" not in kernel_counts(lower(graph(step), O0, load_profile("ascend910b")).ops)   # fp32 Cube path
    assert "Cast" not in kernel_counts(lower(graph(conv_bn_relu_step()), O0, NPU).ops)          # fp16 already


@pytest.mark.slow
@pytest.mark.long       # two full-size compiles; the rule itself is checked above on every run
def test_o0_resnet50_casts_as_many_tensors_as_the_profiled_step():
    """The migration guide's O0 ResNet-50 (batch 32, nn.Adam, MindSpore 1.8) runs 262 Cast kernels a step
    (hardware/calibration/data/docs18_resnet50_ops.csv); its O3 run's costliest op types hold none. Both runs
    convert each conv weight and its gradient for Adam: 111 and 118 TransData kernels."""
    from hardware.model.graph import extract_graph

    rows = list(csv.DictReader(line for line in DOCS18.read_text().splitlines() if not line.startswith("#")))
    profiled = {(r["run"], r["op_type"]): int(r["count"]) for r in rows}
    o0 = make_settings({"batch_size": 32, "amp_level": "O0", "mode": "graph", "jit_level": "O2", "optimizer": "adam"})
    counts = kernel_counts(lower(extract_graph("resnet50", "full", {"num_classes": 10}, o0), o0, NPU).ops)
    assert counts["Cast"] == pytest.approx(profiled["o0", "Cast"], rel=0.05)
    assert counts["TransData"] == pytest.approx(profiled["o0", "TransData"], rel=0.05)
    o3 = make_settings({"batch_size": 32, "amp_level": "O3", "loss_scale": "static", "mode": "graph",
                        "jit_level": "O2", "optimizer": "adam"})
    counts = kernel_counts(lower(extract_graph("resnet50", "full", {"num_classes": 10}, o3), o3, NPU).ops)
    assert counts["Cast"] < profiled["o0", "Cast"] / 4
    assert counts["TransData"] == pytest.approx(profiled["o3-sink", "TransData"], rel=0.05)


def profile_table(workload: str) -> dict:
    return tomllib.loads(COUNTS.read_text())[workload]


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "knobs"), [
    ("resnet50", {"batch_size": 32, "amp_level": "O2", "loss_scale": "static"}),
    pytest.param("bert-base", {"batch_size": 64, "amp_level": "O2", "loss_scale": "dynamic", "optimizer": "adamw"},
                 marks=pytest.mark.long),     # the long tier: the resnet50 case checks the same lowering rules' join
])
def test_lowered_step_matches_the_profiled_kernel_counts(workload, knobs):
    """The real full-size step at the profile's batch and recipe (fp16, loss scale, the network's overrides:
    BERT's GeLU kernel), jit O2 (graph sink)."""
    from hardware.model.graph import extract_graph

    settings = make_settings({**knobs, "mode": "graph", "jit_level": "O2"})
    from hardware.calibration.kernel_counts import family_count

    table = profile_table(workload)
    counts = kernel_counts(lower(extract_graph(workload, "full", table["overrides"], settings), settings, NPU).ops)
    for kind, expected in table["counts"].items():
        assert counts[kind] == pytest.approx(expected, rel=0.10), kind
    for family, expected in table["families"].items():
        assert family_count(counts, family) == pytest.approx(expected, rel=0.10), family


# --- memory: what Ascend's kernels keep for backward ----------------------------------------------
def kept_graph(entries, activations):
    return graph([], activations=activations, kept_activations=entries)


def test_relu_and_dropout_keep_bitmasks_on_npu():
    from hardware.model.memory import kept_activations

    mib = 2**20
    entries = [["ReLU", 0, "ReluGrad", 1, 4 * mib, mib],                         # only its gradient reads it
               ["ReLU", 0, "Conv2DBackpropFilter+ReluGrad", 1, 4 * mib, mib],   # the next conv's dW reads it too
               ["Dropout", 1, "DropoutGrad", 1, 2 * mib, mib],                   # an fp16 mask
               ["Conv2D", 0, "BatchNormGrad", 1, 2 * mib, mib]]                  # unchanged
    g = kept_graph(entries, activations=12 * mib)
    mask = mib // 8
    assert kept_activations(g, CPU) == 12 * mib
    assert kept_activations(g, NPU) == 12 * mib - 4 * mib - 2 * mib + 3 * mask


def test_bitmask_saving_scales_to_the_peak():
    from hardware.model.memory import bitmask_delta

    entries = [["ReLU", 0, "ReluGrad", 2, 8 * 2**20, 2**21]]                      # two micro-batches summed
    assert bitmask_delta(kept_graph(entries, activations=4 * 2**20)) == -(8 * 2**20 - 2**18) // 2


@pytest.mark.slow
def test_extraction_records_who_keeps_what():
    """The real resnet50/tiny step (fp32): most ReLU outputs are kept for the next weight gradient as well,
    so Ascend keeps them plus a mask (1 bit per 4-byte element); only the last one (before the pooling)
    is kept for its ReluGrad alone and becomes a mask."""
    from hardware.model.graph import extract_graph
    from hardware.model.memory import bitmask_delta

    g = extract_graph("resnet50", "tiny", {}, Settings())
    entries = g.meta["kept_activations"]
    assert sum(e[4] for e in entries) >= g.activation_bytes
    relu = [e for e in entries if e[0] == "ReLU" and e[1] == 0]
    only_grad = sum(e[4] for e in relu if e[2] == "ReluGrad")
    assert only_grad > 0 and any("Conv2DBackpropFilter" in e[2] for e in relu)
    assert -only_grad < bitmask_delta(g) <= sum(e[4] for e in relu) / 32


def test_each_matmul_gradient_is_converted_once_for_the_optimizer():
    """Two same-shaped weight gradients (written FRACTAL_NZ by their MatMuls) read by a plain-layout
    update each: two TransData, and a second update of the same gradients converts nothing more."""
    x, dy, dw = t(64, 32), t(64, 32), t(32, 32)
    back = [op("MatMul", (x, dy), (dw,), "backward", "cube") for _ in range(2)]
    update = [op("ApplyMomentum", (dw,), (dw,), "optimizer") for _ in range(4)]
    lowered = lower(graph(back + update), O0, NPU).ops
    trans = [i for i, o in enumerate(lowered) if o.type == "TransData"]
    optimizer_trans = [i for i in trans if lowered[i + 1].type == "ApplyMomentum"]
    assert len(optimizer_trans) == 2


def conv_step_with(update: str) -> list[Op]:
    """conv_bn_relu_step, its weight updated by `update` (the gradient last, as Adam and ApplyMomentum take it)."""
    step = conv_bn_relu_step()
    w = step[0].inputs[1]
    return step + [op(update, (w, w, w, t(dtype="Float32"), w), (w,), "optimizer")]


@pytest.mark.parametrize("settings", [O0, O2], ids=["O0", "O2"])
def test_adam_keeps_a_conv_weight_in_nd_so_it_and_its_gradient_are_converted_each_step(settings):
    """Under Momentum the weight and its gradient stay in FRACTAL_Z (An et al.: 9 TransData for ResNet-50); under
    nn.Adam the forward conv converts the ND weight and the update the FRACTAL_Z gradient (docs r1.8's tables:
    111 and 118): two more TransData per convolution, one before the Conv2D and one before the update."""
    def weight_trans(kind: str) -> list[str]:
        lowered = lower(graph(conv_step_with(kind)), settings, NPU).ops
        w = conv_bn_relu_step()[0].inputs[1]
        return [o.phase for o in lowered if o.type == "TransData" and o.inputs[0].shape == w.shape]

    assert weight_trans("ApplyMomentum") == []
    assert weight_trans("Adam") == ["forward", "optimizer"]


def test_an_in_place_add_is_one_add_kernel_as_the_out_of_place_one():
    """`x += y` (mindcv's residual add) reaches the CPU graph as Mul(y, alpha), Add and an Assign back into
    x; on the NPU it costs what `x + y` costs: one Add, no scalar multiply, no write-back."""
    x, y, s = t(8, 256, 56, 56), t(8, 256, 56, 56), t()
    scaled, total = t(8, 256, 56, 56), t(8, 256, 56, 56)
    expand = "Expand/_InplaceAddExt"
    in_place = [Op(type="Mul", scope=expand, inputs=(y, s), outputs=(scaled,), flops=10, bytes=1, unit="vector",
                   phase="forward"),
                Op(type="Add", scope=expand, inputs=(x, scaled), outputs=(total,), flops=10, bytes=1, unit="vector",
                   phase="forward"),
                op("Assign", (x, total), (x,))]
    lowered = lower(graph(in_place), O0, NPU).ops
    plain = lower(graph([op("Add", (x, y), (total,))]), O0, NPU).ops
    assert [o.type for o in lowered] == [o.type for o in plain] == ["Add"]
    assert lowered[0].bytes == plain[0].bytes and lowered[0].flops == 10
