"""Forward-only prediction: only the network's forward kernels, no gradients or optimizer states."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hardware.model.inference import WORKING_SET_ESTIMATE, forward_graph, predict_inference
from hardware.op_times import predicted_op_profile
from hardware.model.opgraph import Op
from hardware.model.predict import predict
from hardware.model.profile import load_profile
from model_graphs import FakeHost, elementwise, mlp_step, tensor  # noqa: E402
from msbench.settings import Settings

B, CPU = load_profile("ascend910b"), load_profile("cpu")
GRAPH = Settings(mode="graph")


def with_loss(g):
    """The MLP step with a loss kernel under the training step's loss scope, as extracted graphs have."""
    t = tensor((g.batch_size, 10))
    loss = Op(type="SoftmaxCrossEntropyWithLogits", scope="Default/loss_net-LossNet/loss_fn-CE/Softmax",
              inputs=(t,), outputs=(t,), flops=t.elements, bytes=2 * t.nbytes, unit="vector", phase="forward")
    return dataclasses.replace(g, ops=(*g.ops, loss), grad_accum=2, meta={"state_bytes": 3 * g.param_bytes})


def test_the_forward_graph_keeps_the_networks_forward_kernels_only():
    g = with_loss(mlp_step(64))
    fwd = forward_graph(g)
    assert fwd.ops and all(op.phase == "forward" and "loss_fn" not in op.scope for op in fwd.ops)
    assert len(fwd.ops) == sum(op.phase == "forward" for op in g.ops) - 1
    assert fwd.grad_accum == 1 and fwd.activation_bytes == 0 and "state_bytes" not in fwd.meta


def test_inference_costs_less_than_a_training_step_and_holds_no_training_state():
    g = with_loss(mlp_step(64))
    for profile in (B, CPU):
        train = predict(g, GRAPH, profile, FakeHost())
        infer = predict_inference(g, GRAPH, profile, FakeHost())
        assert 0 < infer.step_time_s < train.step_time_s
        assert infer.breakdown["forward"] < train.breakdown["forward"] + train.breakdown["backward"]
        assert set(infer.breakdown) == {"forward", "dispatch", "roundtrip", "transfer"}
        assert sum(infer.breakdown.values()) == pytest.approx(infer.step_time_s)
        assert infer.memory["grads"] == infer.memory["optimizer_states"] == infer.memory["accumulation"] == 0
        assert infer.peak_memory_bytes < train.peak_memory_bytes
        assert infer.throughput == pytest.approx(64 / infer.step_time_s)
        assert WORKING_SET_ESTIMATE in infer.detail["estimates"]


def test_latency_grows_with_the_batch_and_the_prediction_is_deterministic():
    small, large = (predict_inference(mlp_step(b), GRAPH, B, FakeHost()) for b in (8, 512))
    assert large.step_time_s > small.step_time_s
    again = predict_inference(mlp_step(512), GRAPH, B, FakeHost())
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(large.to_dict(), sort_keys=True)


def test_the_predicted_op_profile_sums_the_kernels_per_type():
    pred = predict(mlp_step(64, layers=2), GRAPH, CPU, FakeHost())
    profile = predicted_op_profile(pred.parts.kernels, pred.parts.slots)
    assert profile["total_s"] == pytest.approx(sum(k.time_s for k in pred.parts.kernels))
    assert profile["by_type"]["MatMul"]["calls"] == 6 and profile["by_type"]["ApplyMomentum"]["calls"] == 2
    assert sum(e["share"] for e in profile["by_type"].values()) == pytest.approx(1.0)
    seconds = [k["s"] for k in profile["top_kernels"]]
    slowest = max(pred.parts.kernels, key=lambda k: k.time_s)
    assert seconds == sorted(seconds, reverse=True) and seconds[0] == pytest.approx(slowest.time_s)
    assert profile["top_kernels"][0]["type"] == slowest.ops[0].type
    assert elementwise((4, 4)).type in profile["by_type"]
    slots = sum(e["slot_s"] for e in profile["by_type"].values())
    assert slots == pytest.approx(sum(s.slot_s for s in pred.parts.slots)) and slots >= profile["total_s"]


def test_the_model_target_predicts_inference_cells_and_adds_op_times_only_when_profiling(monkeypatch):
    from hardware.model import outcome
    from hardware.model import target as model_target
    from msbench.cell import Cell
    from msbench.settings import make_settings

    seen = []

    def fake_model_prediction(plan):
        seen.append(plan.cell.scenario)
        g, profile = mlp_step(32), plan.profile
        run = predict_inference if plan.cell.scenario == "inference" else predict
        host = FakeHost()
        return outcome.CellPrediction(run(g, plan.settings, profile, host), g, profile, host)

    monkeypatch.setattr(outcome, "model_prediction", fake_model_prediction)
    cell = Cell(workload="resnet50", settings=make_settings({"mode": "graph"}), target="model:cpu", scenario="inference")
    plain = model_target.ModelTarget("cpu").run(cell)
    assert seen == ["inference"] and plain.metrics.op_profile == {}
    assert plain.metrics.latency_s == {"p50": plain.metrics.step_time_s}
    profiled = model_target.ModelTarget("cpu", profile_dir="unused").run(cell)
    assert profiled.metrics.op_profile["by_type"]["MatMul"]["calls"] == 4
    assert profiled.metrics.op_profile["source"] == "model" and "ApplyMomentum" not in profiled.metrics.op_profile["by_type"]
    adam = Cell(workload="resnet50", settings=make_settings({"optimizer": "adam"}), target="model:cpu",
                scenario="inference")
    assert "optimizer='adam'" in model_target.ModelTarget("cpu").supports(adam)
