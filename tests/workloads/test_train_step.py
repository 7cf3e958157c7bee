"""The one training step: every knob it applies, on the toy MLP (real MindSpore numerics, no mocks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))
from toy_workload import ToyWorkload  # noqa: E402

from msbench.settings import make_settings  # noqa: E402
from workloads import train_step as ts  # noqa: E402

ms = pytest.importorskip("mindspore")


@pytest.fixture
def toy():
    return ToyWorkload()


@pytest.fixture(params=["graph", "pynative"])
def mode(request, scratch):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield request.param
    ms.set_context(mode=ms.PYNATIVE_MODE)


def batch(toy, preset, n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, preset.features)).astype(np.float32)
    y = rng.integers(0, preset.classes, n).astype(np.int32)
    return ms.Tensor(x), ms.Tensor(y)


def params_of(step):
    return {p.name: p.asnumpy().copy() for p in step.network.trainable_params()}


def test_import_does_not_load_mindspore():
    code = "import sys, workloads.train_step; print('mindspore' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_batch_arithmetic(toy):
    preset = toy.preset("tiny")
    s = make_settings({"batch_size": 8, "grad_accum": 4, "devices": 2})
    assert ts.micro_batch_size(preset, s) == 8
    assert ts.global_samples_per_step(preset, s) == 64
    assert ts.scaled_lr(preset, s) == pytest.approx(preset.lr * 64 / preset.batch_size)
    assert ts.steps_per_epoch(preset, s) == preset.train_samples // 64


@pytest.mark.slow
def test_trains_in_both_modes_and_beats_chance(toy, mode):
    preset = toy.preset("tiny")
    result = ts.train(toy, preset, make_settings({"mode": mode}), epochs=preset.epochs)
    assert result.steps == preset.epochs * (preset.train_samples // preset.batch_size)
    assert result.losses[-1] < 0.5 * result.losses[0]
    assert toy.evaluate(result.network, preset)["top1"] > toy.chance(preset) + 0.3


@pytest.mark.slow
def test_graph_and_pynative_give_the_same_losses(toy, scratch):
    preset = toy.preset("tiny")
    losses = {}
    for mode in ("graph", "pynative"):
        ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
        losses[mode] = ts.train(toy, preset, make_settings({"mode": mode}), epochs=1).losses
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(losses["graph"], losses["pynative"], rtol=1e-5)


@pytest.mark.slow
def test_grad_accum_two_matches_a_doubled_batch(toy, mode):
    preset = toy.preset("nonorm")   # BatchNorm statistics would differ between 2x16 and 32 by design
    x, y = batch(toy, preset, 32)
    after = {}
    for knobs in ({"grad_accum": 2, "batch_size": 16}, {"batch_size": 32}):
        step = ts.build_train_step(toy, preset, make_settings({"mode": mode, **knobs}))
        assert step.step_batch == 32
        loss = float(step.cell(x, y).asnumpy())
        after[knobs.get("grad_accum", 1)] = (loss, params_of(step))
    assert after[2][0] == pytest.approx(after[1][0], rel=1e-5)
    for name, value in after[1][1].items():
        np.testing.assert_allclose(after[2][1][name], value, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_amp_o2_dynamic_loss_scale_skips_overflow_and_halves(toy, mode):
    preset = toy.preset("tiny")
    step = ts.build_train_step(toy, preset, make_settings({"mode": mode, "amp_level": "O2", "loss_scale": "dynamic"}))
    x, y = batch(toy, preset, preset.batch_size)
    scaler = step.cell.scaler
    assert float(scaler.scale_value.asnumpy()) == ts.DYNAMIC_LOSS_SCALE
    step.cell(x, y)                                   # 2**16 is fine for this net: the update is applied
    before = params_of(step)
    scaler.scale_value.set_data(ms.Tensor(2.0**60, ms.float32))   # fp16 gradients overflow for sure
    loss = float(step.cell(x, y).asnumpy())
    assert np.isfinite(loss)                          # the reported loss is unscaled fp32
    assert float(scaler.scale_value.asnumpy()) == 2.0**59
    for name, value in params_of(step).items():       # the overflowing update was skipped
        np.testing.assert_array_equal(value, before[name])
    dense = next(c for _, c in step.network.cells_and_names() if type(c).__name__ == "Dense")
    assert dense.weight.dtype == ms.float32           # master weights stay fp32 under O2


@pytest.mark.parametrize("level,keep_bn,expected", [("O0", None, "O0"), ("O1", None, "O1"),
                                                     ("O2", None, "fp16, norms fp32"), ("O2", False, "fp16 everywhere"),
                                                     ("O3", None, "fp16 everywhere"), ("O3", True, "fp16, norms fp32")])
def test_amp_effective_names_what_was_applied(level, keep_bn, expected):
    s = make_settings({"amp_level": level, "keep_batchnorm_fp32": keep_bn})
    assert ts.amp_effective(s) == expected


@pytest.mark.slow
def test_recompute_keeps_the_losses(toy, scratch):
    ms.set_context(mode=ms.GRAPH_MODE)
    preset = toy.preset("tiny")
    x, y = batch(toy, preset, preset.batch_size)
    losses = {}
    for rc in ("none", "selective", "full"):
        step = ts.build_train_step(toy, preset, make_settings({"mode": "graph", "recompute": rc}))
        assert step.recomputed_blocks == {"none": 0, "selective": 1, "full": preset.depth}[rc]
        losses[rc] = [float(step.cell(x, y).asnumpy()) for _ in range(3)]
    ms.set_context(mode=ms.PYNATIVE_MODE)
    assert losses["selective"] == losses["none"] == losses["full"]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["momentum", "adam", "adamw"])
@pytest.mark.parametrize("schedule", ["constant", "cosine", "step", "poly"])
def test_optimizers_and_schedules_update_the_weights(toy, scratch, optimizer, schedule):
    preset = toy.preset("tiny")
    step = ts.build_train_step(toy, preset, make_settings({"optimizer": optimizer, "lr_schedule": schedule}),
                               total_steps=4)
    x, y = batch(toy, preset, preset.batch_size)
    before = params_of(step)
    losses = [float(step.cell(x, y).asnumpy()) for _ in range(4)]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert any(not np.array_equal(v, before[k]) for k, v in params_of(step).items())


@pytest.mark.slow
def test_compiles_without_running(toy, scratch):
    ms.set_context(mode=ms.GRAPH_MODE)
    preset = toy.preset("tiny")
    step = ts.build_train_step(toy, preset, make_settings({"mode": "graph", "grad_accum": 2}))
    before = params_of(step)
    step.cell.compile(*[ms.Tensor(a) for a in toy.synthetic_batch(preset, step.step_batch)])
    ms.set_context(mode=ms.PYNATIVE_MODE)
    for name, value in params_of(step).items():
        np.testing.assert_array_equal(value, before[name])


def test_lr_scaling_rules(toy):
    preset = toy.preset("tiny")
    big = make_settings({"devices": 4})
    assert ts.scaled_lr(preset, make_settings({"devices": 4, "lr_scaling": "none"})) == preset.lr
    assert ts.warmup_steps(preset, big, 100) == min(ts.steps_per_epoch(preset, big), 50) > 0
    assert ts.warmup_steps(preset, make_settings({"batch_size": max(1, preset.batch_size // 2)}), 100) == 0
    assert ts.warmup_steps(preset, make_settings({"devices": 4, "lr_scaling": "none"}), 100) == 0
    assert "warm-up over" in ts.lr_rule(preset, big, 100) and "x 4" in ts.lr_rule(preset, big, 100)
    assert ts.lr_rule(preset, make_settings({}), 100) == f"preset lr {preset.lr:g}"


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_warm_up_ramps_from_the_preset_rate_to_the_scaled_one(toy, schedule):
    import mindspore as ms

    preset = toy.preset("tiny")
    settings = make_settings({"devices": 4, "lr_schedule": schedule})
    total = 40
    warm = ts.warmup_steps(preset, settings, total)
    lr = ts.learning_rate(preset, settings, total)
    values = [float(lr(ms.Tensor(step, ms.int32)).asnumpy()) for step in (0, warm // 2, warm, total - 1)]
    peak = ts.scaled_lr(preset, settings)
    assert values[0] == pytest.approx(preset.lr) and preset.lr < values[1] < peak
    assert values[2] == pytest.approx(peak, rel=0.05)        # the schedule itself has barely decayed
    if schedule == "cosine":
        assert values[3] < 0.1 * peak
    else:
        assert values[3] == pytest.approx(peak)


@pytest.mark.slow
@pytest.mark.parametrize("clip", ["norm", "global_norm"])
def test_grad_clip_bounds_the_update(toy, scratch, clip):
    """Momentum's first update is lr x (gradient + weight decay x weight): recover the gradient the optimizer
    saw and check that clipping bounded it (each tensor, or all together) where the unclipped one is larger."""
    ms.set_context(mode=ms.GRAPH_MODE)
    preset = toy.preset("nonorm")
    x, y = batch(toy, preset, preset.batch_size)
    x = x * 100.0                                     # gradients far above norm 1
    norms = {}
    for mode in ("none", clip):
        step = ts.build_train_step(toy, preset, make_settings({"mode": "graph", "grad_clip": mode}))
        before = params_of(step)
        step.cell(x, y)
        after = params_of(step)
        seen = {k: (before[k] - after[k]) / preset.lr - ts.WEIGHT_DECAY * before[k] for k in before}
        norms[mode] = {k: float(np.linalg.norm(g)) for k, g in seen.items()}
    ms.set_context(mode=ms.PYNATIVE_MODE)
    total = {m: float(np.sqrt(sum(n * n for n in v.values()))) for m, v in norms.items()}
    assert total["none"] > 5 * ts.GRAD_CLIP_NORM
    if clip == "norm":
        assert max(norms["norm"].values()) <= ts.GRAD_CLIP_NORM * 1.001
        assert total["norm"] > ts.GRAD_CLIP_NORM * 1.001          # each tensor alone, not all together
    else:
        assert total["global_norm"] == pytest.approx(ts.GRAD_CLIP_NORM, rel=1e-3)
