"""The pure prediction, one mechanism at a time, on small hand-built graphs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.model.comm import allreduce_seconds, gradient_allreduce, level_groups
from hardware.model.compute import (cube_efficiency, gemm_dims, gemm_shape, kernels, make_kernel, tiles_per_core,
                                    traffic_table)
from hardware.model.lowering import lower
from hardware.model.memory import estimate_memory
from hardware.model.predict import canonical, predict
from hardware.model.profile import load_profile
from model_graphs import FakeHost, elementwise, graph, matmul, mlp_step, tensor as tensor_spec  # noqa: E402
from msbench.settings import Settings

A, B, CPU = load_profile("ascend910a"), load_profile("ascend910b"), load_profile("cpu-xeon")   # a cpu profile without per-op classes
GRAPH = Settings(mode="graph")


def step(g, settings=GRAPH, profile=B, host=FakeHost()):
    return predict(g, settings, profile, host)


# --- compute -------------------------------------------------------------------------------------

def test_cube_time_is_flops_over_rate_times_class_efficiency_at_the_work_per_core():
    op = matmul(4096, 4096, 4096, "Float16")
    k = make_kernel([op], B)
    tiles = 256 ** 3 / B.cube.cores
    expected = op.flops / (B.cube.tflops_fp16 * 1e12 * B.kernel_classes.matmul.at(tiles))
    assert k.compute_s == pytest.approx(expected) and not k.memory_bound and k.kernel_class == "matmul"
    assert k.time_s == pytest.approx(k.floor_s + k.compute_s) and k.floor_s == B.kernel_classes.min_kernel_us * 1e-6
    # the CPU profile has no classes: one table by the reduction length K
    c = make_kernel([op], CPU)
    assert c.compute_s == pytest.approx(op.flops / (CPU.cube.tflops_fp16 * 1e12 * CPU.cube.efficiency.at(4096)))


def test_precision_rule_per_chip():
    fp32, fp16 = matmul(2048, 2048, 2048, "Float32"), matmul(2048, 2048, 2048, "Float16")
    # 910A runs fp32 matmuls in fp16 (allow_fp32_to_fp16): same Cube time as fp16.
    assert make_kernel([fp32], A).compute_s == pytest.approx(make_kernel([fp16], A).compute_s)
    # 910B keeps fp32 (must_keep_origin_dtype): the slower fp32 Cube rate.
    ratio = make_kernel([fp32], B).compute_s / make_kernel([fp16], B).compute_s
    assert ratio == pytest.approx(B.cube.tflops_fp16 / B.cube.tflops_fp32)


def test_fp32_convs_run_as_hf32_on_the_910b_only():
    """CANN's default allow_hf32 (Atlas A2): fp32 Conv-class ops run as HF32, fp32 MatMuls stay fp32."""
    def conv(dtype):
        return dataclasses.replace(matmul(2048, 2048, 2048, dtype), type="Conv2D", scope="Default/net/conv")
    fp32, fp16 = make_kernel([conv("Float32")], B), make_kernel([conv("Float16")], B)
    assert fp32.kernel_class == "conv_forward" and B.precision.hf32_convs
    assert fp32.compute_s / fp16.compute_s == pytest.approx(B.cube.tflops_fp16 / B.cube.tflops_hf32)
    assert B.cube.tflops_fp32 < B.cube.tflops_hf32 < B.cube.tflops_fp16
    # the 910A casts fp32 convs to fp16 (allow_fp32_to_fp16): no HF32 path is read
    assert make_kernel([conv("Float32")], A).compute_s == pytest.approx(make_kernel([conv("Float16")], A).compute_s)


def test_gemm_dims_and_tile_padding():
    assert gemm_dims(matmul(64, 256, 32)) == (64, 32, 256)
    # M = 1 fills one 16-row tile: the same Cube work per core, and time, as M = 16.
    one, sixteen = make_kernel([matmul(1, 1024, 1024)], B), make_kernel([matmul(16, 1024, 1024)], B)
    assert one.compute_s == pytest.approx(sixteen.compute_s)
    # on the CPU profile (K table) the padding to its 8-lane tile is an explicit factor
    assert cube_efficiency(matmul(1, 1024, 1024), CPU) == pytest.approx(cube_efficiency(matmul(8, 1024, 1024), CPU) / 8)


def test_gemm_shape_of_each_conv_and_matmul_class():
    def op(kind, out, flops):
        t = tensor_spec(out)
        return dataclasses.replace(matmul(2, 2, 2), type=kind, outputs=(t,), flops=flops)
    # a 3x3 conv 64->128 at 28x28, batch 8: M = 8*28*28, N = 128, K = 64*9
    m, n, k = 8 * 28 * 28, 128, 64 * 9
    assert gemm_shape(op("Conv2D", (8, 128, 28, 28), 2 * m * n * k)) == (1, m, n, k)
    assert gemm_shape(op("Conv2DBackpropInput", (8, 64, 28, 28), 2 * m * n * k)) == (1, m, 64, 128 * 9)
    assert gemm_shape(op("Conv2DBackpropFilter", (128, 64, 3, 3), 2 * m * n * k)) == (1, 64 * 9, 128, m)
    assert gemm_shape(op("BatchMatMul", (12, 128, 64), 2 * 12 * 128 * 64 * 32)) == (12, 128, 64, 32)
    # a stride-2 input gradient runs as a stride-1 conv of the dilated dy: 4x the useful K at each dx pixel
    strided = dataclasses.replace(op("Conv2DBackpropInput", (8, 64, 56, 56), 2 * m * n * k),
                                  inputs=(tensor_spec((8, 128, 28, 28)), tensor_spec((128, 64, 3, 3))))
    assert gemm_shape(strided) == (1, 8 * 56 * 56, 64, 128 * 9)
    assert make_kernel([strided], A).compute_s > 3.5 * make_kernel([dataclasses.replace(strided, inputs=())], A).compute_s
    assert tiles_per_core(12, 128, 64, 32, 16, 24) == 12 * 8 * 4 * 2 / 24


def test_elementwise_is_memory_bound_and_scales_with_bytes():
    small, big = make_kernel([elementwise((1024, 1024))], B), make_kernel([elementwise((8192, 1024))], B)
    assert small.memory_bound and big.memory_bound
    for k in (small, big):
        table = traffic_table("elementwise", B)
        assert k.kernel_class == "elementwise" and table is B.kernel_classes.elementwise
        assert k.memory_s == pytest.approx(k.bytes / (B.memory.l2_gbps * 1e9 * table.at(k.bytes)))
    assert big.memory_s > 4 * small.memory_s


def test_cast_is_folded_on_ascend_and_a_kernel_on_cpu():
    ops = [elementwise((1024, 1024)), elementwise((1024, 1024), kind="Cast"), elementwise((1024, 1024))]
    settings = Settings()
    assert len(kernels(lower(graph(ops), settings, B).ops, B)) == 2
    assert len(kernels(lower(graph(ops), settings, CPU).ops, CPU)) == 3


def test_fusion_removes_intermediate_traffic_and_launches():
    chain = [elementwise((4096, 1024), group=7, kind=k) for k in ("Add", "Mul", "ReLU")]
    fused, unfused = kernels(chain, B), kernels([dataclasses.replace(op, fusion_group=None) for op in chain], B)
    assert len(fused) == 1 and len(unfused) == 3
    tensor = 4096 * 1024 * 4
    assert fused[0].bytes == 3 * 2 * tensor - 2 * 2 * tensor       # only the chain's input and output remain
    assert fused[0].time_s < sum(k.time_s for k in unfused) / 2
    g_fused, g_unfused = graph(chain), graph([dataclasses.replace(op, fusion_group=None) for op in chain])
    assert step(g_fused).detail["kernels"] == 1 and step(g_unfused).detail["kernels"] == 3
    assert step(g_fused).step_time_s < step(g_unfused).step_time_s


def test_amp_halves_traffic_and_speeds_up_910b():
    """fp16 activations and weights: each forward and backward kernel moves exactly half its fp32 bytes,
    the fp32 optimizer update the same bytes, and both passes run faster."""
    fp32, fp16 = step(mlp_step(256, dtype="Float32")), step(mlp_step(256, dtype="Float16"))

    def traffic(p, phase):
        return [k.bytes for k in p.parts.kernels if k.phase == phase]

    for phase in ("forward", "backward"):
        assert [2 * b for b in traffic(fp16, phase)] == traffic(fp32, phase) and sum(traffic(fp32, phase)) > 0
        assert fp16.breakdown[phase] < fp32.breakdown[phase]
    assert traffic(fp16, "optimizer") == traffic(fp32, "optimizer")


# --- host: dispatch, round trips, data ----------------------------------------------------------

def many_small_ops():
    return graph([elementwise((64, 64)) for _ in range(500)])


def test_dispatch_pynative_worse_than_kernel_by_kernel_worse_than_sink():
    g = many_small_ops()
    eager = step(g, Settings(mode="pynative"))
    o0 = step(g, Settings(mode="graph", jit_level="O0"))
    o2 = step(g, Settings(mode="graph", jit_level="O2"))
    assert eager.step_time_s > o0.step_time_s > o2.step_time_s
    assert eager.bound == "host"
    # async host: a kernel costs max(device, dispatch) -> 500 tiny kernels cost 500 dispatches.
    assert eager.breakdown["dispatch"] + sum(eager.breakdown[p] for p in ("forward",)) == pytest.approx(
        500 * B.launch.pynative_us * 1e-6, rel=1e-6)


def test_cpu_dispatch_adds_to_kernel_time():
    g = many_small_ops()
    p = step(g, Settings(mode="pynative"), CPU)
    assert p.breakdown["dispatch"] == pytest.approx(500 * CPU.launch.pynative_us * 1e-6)


def test_sink_amortises_the_round_trip():
    g = graph([matmul(256, 1024, 1024)], steps_per_epoch=100)
    plain = step(g, Settings(mode="graph"))
    sunk = step(g, Settings(mode="graph", sink=True, sink_size=10))
    epoch = step(g, Settings(mode="graph", sink=True))
    assert plain.breakdown["roundtrip"] == pytest.approx((B.launch.step_us + B.launch.nonsink_us) * 1e-6)
    assert sunk.breakdown["roundtrip"] == pytest.approx(B.launch.step_us * 1e-6 / 10)
    assert epoch.breakdown["roundtrip"] == pytest.approx(B.launch.step_us * 1e-6 / 100)


def test_without_sink_the_batch_hand_over_is_serial_with_the_device():
    """Model.train's non-sink loop hands the batch over on the thread that then waits for the loss: the
    iterator's consumer CPU (per sample, at the host's core speed) adds to the step; under sink, and on a
    host that is the device (its pipeline time already adds up), it does not."""
    g = graph([matmul(256, 1024, 1024)], batch=64, steps_per_epoch=100)
    host = FakeHost(consumer_s=2e-5)
    handover = 2e-5 * 64 / B.host.core_speed
    plain, bare = step(g, GRAPH, host=host), step(g, GRAPH)
    assert plain.breakdown["roundtrip"] == pytest.approx((B.launch.step_us + B.launch.nonsink_us) * 1e-6 + handover)
    assert plain.step_time_s == pytest.approx(bare.step_time_s + handover)
    sunk = step(g, Settings(mode="graph", sink=True), host=host)
    assert sunk.breakdown["roundtrip"] == pytest.approx(B.launch.step_us * 1e-6 / 100)
    on_cpu, cpu_bare = step(g, GRAPH, CPU, host), step(g, GRAPH, CPU)
    assert on_cpu.breakdown["roundtrip"] == pytest.approx(cpu_bare.breakdown["roundtrip"])


def test_without_sink_the_rest_of_the_loop_is_serial_with_the_device_and_read_as_an_estimate():
    """`launch.nonsink_us` adds to a non-sink step of a separate device only, and only such a step lists it
    among the estimates it read (so the report re-predicts the sink tip at both ends of its range)."""
    g = graph([matmul(256, 1024, 1024)], batch=64, steps_per_epoch=100)
    plain, sunk = step(g, GRAPH), step(g, Settings(mode="graph", sink=True))
    none = dataclasses.replace(B, launch=dataclasses.replace(B.launch, nonsink_us=0.0))
    assert B.launch.nonsink_us > 1000
    assert plain.step_time_s == pytest.approx(step(g, GRAPH, none).step_time_s + B.launch.nonsink_us * 1e-6)
    assert sunk.step_time_s == pytest.approx(step(g, Settings(mode="graph", sink=True), none).step_time_s)
    keys = lambda p: set(p.detail["estimates"])                                          # noqa: E731
    assert "launch.nonsink_us" in keys(plain) and "launch.nonsink_us" not in keys(sunk)
    assert "launch.nonsink_us" not in keys(step(g, GRAPH, CPU))


def test_each_shipped_nonsink_constant_is_the_step_traces_derivation():
    """Every accelerator profile's `launch.nonsink_us` is what `python -m hardware.calibration.nonsink` derives
    from the step trace now (a changed core speed, copy or consumer figure asks for it again); the traced chip's
    own value reproduces the trace's serial host time at its batch."""
    from hardware.calibration import nonsink

    for name in nonsink.accelerator_profiles():
        assert load_profile(name).launch.nonsink_us == pytest.approx(nonsink.derived_nonsink_us(name), abs=0.05), name
    trace = nonsink.STEP_TRACE
    entry = json.loads(nonsink.HOST_COST.read_text())["entries"][trace["pipeline"]]
    t = nonsink.terms(entry, trace["batch"], trace["profile"])
    assert t["total"] * 1e3 == pytest.approx(trace["gap_nosink_ms"] - trace["gap_sink_ms"], abs=1e-3)


def test_the_nonsink_script_prices_the_hand_over_as_the_model_does(capsys):
    from hardware.calibration import nonsink
    from hardware.model.host_time import handover_seconds

    entry = json.loads(nonsink.HOST_COST.read_text())["entries"]["resnet50/full/mindrecord"]
    host = FakeHost(consumer_s=entry["consumer_seconds_per_sample"])
    for name in ("ascend910a", "ascend910b"):
        assert nonsink.terms(entry, 32, name)["handover"] == pytest.approx(
            handover_seconds(32, GRAPH, load_profile(name), host))
    assert "cpu" not in nonsink.accelerator_profiles()
    assert nonsink.main(["--batch", "32"]) == 0 and "_loss_monitor.py" in capsys.readouterr().out


def test_data_pipeline_overlaps_unless_prefetch_zero_and_scales_with_workers():
    g = graph([matmul(256, 1024, 1024)], batch=256)
    host = FakeHost(per_sample_s=1e-4)
    total = 256 * 1e-4 / B.host.core_speed
    overlapped = step(g, Settings(mode="graph", workers=1), host=host)
    serial = step(g, Settings(mode="graph", workers=1, prefetch=0), host=host)
    assert serial.breakdown["data"] == pytest.approx(total)
    assert overlapped.breakdown["data"] == pytest.approx(total - (overlapped.step_time_s - overlapped.breakdown["data"]))
    assert overlapped.bound == "data" and serial.bound == "data"
    fast = step(g, Settings(mode="graph", workers=24), host=FakeHost(per_sample_s=1e-7))
    assert fast.breakdown["data"] == 0 and fast.bound != "data"
    eight = step(g, Settings(mode="graph", workers=8, prefetch=0), host=host)
    assert eight.breakdown["data"] == pytest.approx(total / 8)
    capped = step(g, Settings(mode="graph", workers=64, prefetch=0), host=host)   # only 24 host cores per NPU
    assert capped.breakdown["data"] == pytest.approx(total / B.host.cores_per_device)


def test_cpu_data_pipeline_shares_the_cores():
    g = graph([matmul(256, 1024, 1024)], batch=256)
    p = step(g, Settings(mode="graph"), CPU, FakeHost(per_sample_s=1e-4))
    assert p.breakdown["data"] == pytest.approx(256 * 1e-4 / CPU.host.core_speed)   # serial: no overlap


def test_gradient_accumulation_is_in_the_graph_not_multiplied():
    one = mlp_step(64)
    two = dataclasses.replace(one, grad_accum=2,
                              ops=tuple(op for op in one.ops if op.phase != "optimizer") * 2
                              + tuple(op for op in one.ops if op.phase == "optimizer"))
    p1, p2 = step(one, profile=CPU), step(two, profile=CPU)      # the CPU's kernels: no lowering pass
    assert p2.breakdown["forward"] == pytest.approx(2 * p1.breakdown["forward"])
    assert p2.breakdown["optimizer"] == pytest.approx(p1.breakdown["optimizer"])
    assert p2.detail["samples_per_step"] == 2 * p1.detail["samples_per_step"]


def test_recompute_ops_are_timed_once():
    fwd = matmul(256, 1024, 1024)
    g = graph([fwd, dataclasses.replace(fwd, phase="recompute")])
    p = step(g, profile=CPU)                                      # the CPU's kernels: no lowering pass
    assert p.breakdown["recompute"] == pytest.approx(p.breakdown["forward"])
    assert p.detail["model_flops"] == fwd.flops          # MFU counts useful work only


# --- communication ---------------------------------------------------------------------------

def test_ring_allreduce_alpha_beta():
    cpu = CPU.comm.levels[0]
    s, p = 64 * 2**20, 4
    expected = 2 * (p - 1) * cpu.latency_us * 1e-6 + 2 * (p - 1) / p * s / (cpu.gbps * 1e9 * CPU.comm.efficiency)
    assert allreduce_seconds(s, p, CPU) == pytest.approx(expected)


def test_topology_levels():
    assert [(lv.name, p) for lv, p in level_groups(8, A.comm.levels)] == [("hccs", 4), ("pcie", 2)]
    assert [(lv.name, p) for lv, p in level_groups(16, B.comm.levels)] == [("hccs", 8), ("roce", 2)]
    # 910A's two groups over PCIe make an 8-chip all-reduce slower than 910B's full mesh.
    assert allreduce_seconds(100e6, 8, A) > allreduce_seconds(100e6, 8, B)
    assert allreduce_seconds(100e6, 1, A) == 0.0


def test_buckets_overlap_backward():
    grads = 400 * 2**20
    hidden = gradient_allreduce(grads, 8, backward_s=10.0, profile=B)
    exposed = gradient_allreduce(grads, 8, backward_s=0.0, profile=B)
    assert hidden.buckets == 7
    assert hidden.exposed_s == pytest.approx(allreduce_seconds(grads - 6 * 64 * 2**20, 8, B))
    assert exposed.exposed_s == pytest.approx(exposed.total_s)


def test_data_parallel_throughput_counts_all_devices():
    g = mlp_step(256)
    one, eight = step(g), step(g, Settings(mode="graph", devices=8))
    assert eight.breakdown["comm"] > 0 and one.breakdown["comm"] == 0
    assert eight.throughput == pytest.approx(8 * eight.throughput_per_device)
    assert eight.throughput_per_device <= one.throughput_per_device


# --- memory ------------------------------------------------------------------------------------

def test_model_states_per_optimizer_and_accumulation():
    g = graph([matmul(8, 8, 8)], params=1_000_000, activations=5_000_000)
    momentum = estimate_memory(g, Settings(optimizer="momentum"), B)
    adam = estimate_memory(g, Settings(optimizer="adam"), B)
    accum = estimate_memory(g, Settings(optimizer="adam", grad_accum=4), B)
    assert (momentum.params, momentum.optimizer_states) == (4_000_000, 4_000_000)
    assert adam.optimizer_states == 8_000_000 and accum.accumulation == 4_000_000
    assert momentum.activations == 5_000_000
    dynamic = momentum.activations + momentum.grads + momentum.workspace
    assert momentum.fragmentation == int(dynamic * B.memory.fragmentation)
    assert momentum.peak == sum(momentum.to_dict().values())


def test_backward_frees_activations_as_gradients_appear():
    few_acts = estimate_memory(graph([matmul(8, 8, 8)], params=1_000_000, activations=1_000_000), Settings(), B)
    many_acts = estimate_memory(graph([matmul(8, 8, 8)], params=1_000_000, activations=9_000_000), Settings(), B)
    assert few_acts.grads == 3_000_000            # 4 MB of gradients, 1 MB of it fits where activations were
    assert many_acts.grads == 0 and many_acts.activations == 9_000_000


def test_fused_casts_store_the_fp16_source():
    up = elementwise((1024, 1024), "Float16", kind="Cast")
    up = dataclasses.replace(up, outputs=(dataclasses.replace(up.outputs[0], dtype="Float32"),))
    g = graph([up], activations=10_000_000)
    assert estimate_memory(g, Settings(), CPU).activations == 10_000_000          # CPU runs the Cast as a kernel
    assert estimate_memory(g, Settings(), B).activations == 10_000_000 - 1024 * 1024 * 2


def test_graph_reported_state_bytes_win():
    g = graph([matmul(8, 8, 8)], params=1_000, state_bytes=4_000 * 3 + 64)
    assert estimate_memory(g, Settings(), B).optimizer_states == 8_064


def test_sink_queue_is_bounded():
    g = graph([matmul(8, 8, 8)], batch=256)
    m = estimate_memory(g, Settings(mode="graph", sink=True), B, bytes_per_sample=602_112)
    assert m.data_queue == 2 * 10**9


def test_oom_flips_as_batch_grows_on_910a():
    verdicts = {b: step(mlp_step(b, width=4096, layers=8), GRAPH, A).oom for b in (256, 32768, 131072)}
    assert verdicts == {256: False, 32768: False, 131072: True}


# --- determinism -----------------------------------------------------------------------------

def digest(p) -> str:
    return hashlib.sha256(json.dumps(p.to_dict(), sort_keys=True).encode()).hexdigest()


def test_canonical_rounding():
    assert canonical({"b": 0.1 + 0.2, "a": [1, True, None]}) == {"a": [1, True, None], "b": 0.3}


def test_same_inputs_same_bytes_across_processes_and_threads():
    here = digest(step(mlp_step(128), Settings(mode="graph", devices=8), A, FakeHost(1e-5, 1000)))
    assert here == digest(step(mlp_step(128), Settings(mode="graph", devices=8), A, FakeHost(1e-5, 1000)))
    code = ("import hashlib, json; from model_graphs import *; from hardware.model.predict import predict;"
            "from hardware.model.profile import load_profile; from msbench.settings import Settings;"
            "p = predict(mlp_step(128), Settings(mode='graph', devices=8), load_profile('ascend910a'), FakeHost(1e-5, 1000));"
            "print(hashlib.sha256(json.dumps(p.to_dict(), sort_keys=True).encode()).hexdigest())")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "123",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.getcwd()])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here


def test_prediction_lists_the_estimates_it_reads():
    g = mlp_step(64)
    one = step(g, Settings(mode="graph", jit_level="O0"))
    assert "launch.graph_o0_us" in one.detail["estimates"] and "launch.pynative_us" not in one.detail["estimates"]
    assert "kernel_classes.matmul" in one.detail["estimates"] and "kernel_classes.conv_forward" not in one.detail["estimates"]
    assert not any(key.startswith("comm.") for key in one.detail["estimates"])
    assert "host.core_speed" not in one.detail["estimates"]          # FakeHost: no data pipeline cost
    eager = step(g, Settings(mode="pynative", devices=8), host=FakeHost(per_sample_s=1e-4))
    assert "launch.pynative_us" in eager.detail["estimates"] and "comm.efficiency" in eager.detail["estimates"]
    assert "host.core_speed" in eager.detail["estimates"]
    assert set(one.detail["estimates"]) <= {e.key for e in B.estimates}
    # the 910A's An-fitted MatMul table is no estimate; its traffic table is (the later per-op tables' level)
    on_a = step(g, profile=A).detail["estimates"]
    assert "kernel_classes.matmul" not in on_a and "kernel_classes.memory" in on_a


def test_unaligned_innermost_dimension_slows_vector_kernels():
    aligned, odd = elementwise((4096, 1024), "Float16"), elementwise((4096, 85), "Float16")   # 85 x 2 B: not 32-byte blocks
    nchw = elementwise((32, 3, 85, 85), "Float16")                                       # 4-D: NC1HWC0 on Ascend
    k_odd, k_ok = make_kernel([odd], B), make_kernel([aligned], B)
    base = traffic_table("elementwise", B).at(k_odd.bytes)
    assert k_odd.memory_s == pytest.approx(k_odd.bytes / (B.memory.l2_gbps * 1e9 * base) * B.kernel_classes.unaligned_elementwise)
    assert k_ok.memory_s == pytest.approx(k_ok.bytes / (B.memory.l2_gbps * 1e9 * traffic_table("elementwise", B).at(k_ok.bytes)))
    assert make_kernel([nchw], B).memory_s == pytest.approx(
        make_kernel([nchw], B).bytes / (B.memory.l2_gbps * 1e9 * traffic_table("elementwise", B).at(make_kernel([nchw], B).bytes)))
    assert make_kernel([odd], CPU).memory_s == pytest.approx(memory_only(odd, CPU))      # no classes: no factor


def memory_only(op, profile):
    from hardware.model.compute import memory_seconds
    return memory_seconds(op.bytes, profile)
