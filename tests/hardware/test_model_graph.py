"""Graph extraction of a real workload's training step (compile only), its cache, and forward_flops."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hardware.model.graph as graph_mod
from hardware.model.graph import extract_graph, forward_flops, graph_key
from msbench.errors import ConfigError
from msbench.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD, PRESET = "resnet50", "tiny"


def digest(g) -> str:
    return hashlib.sha256(json.dumps(g.to_dict(), sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("msbench-cache")
        mp.setenv("MSBENCH_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def graphs(cache_root):
    """The default step, full recompute, AMP O2 and two accumulated micro-batches of resnet50/tiny."""
    variants = {"plain": {}, "recompute": {"recompute": "full"}, "o2": {"amp_level": "O2"},
                "accum": {"grad_accum": 2, "batch_size": 16}}
    return {name: extract_graph(WORKLOAD, PRESET, {}, Settings(**knobs)) for name, knobs in variants.items()}


@pytest.mark.slow
def test_every_field_filled(graphs):
    g = graphs["plain"]
    assert (g.workload, g.preset, g.batch_size, g.grad_accum) == (WORKLOAD, PRESET, 32, 1)
    assert {op.phase for op in g.ops} == {"forward", "backward", "optimizer"}
    assert all(op.unit == ("cube" if op.type.startswith("Conv2D") or op.type.endswith("MatMul") else "vector")
               for op in g.ops)
    assert all(op.bytes > 0 and op.outputs for op in g.ops if op.unit == "cube")
    assert g.key and g.activation_bytes > 0 and g.param_bytes == 4 * g.param_count
    momentum = [op for op in g.ops if op.type == "ApplyMomentum"]
    assert len(momentum) == g.meta["trainable_tensors"] and {op.phase for op in momentum} == {"optimizer"}
    assert sum(g.meta["flops_by_phase"].values()) == sum(op.flops for op in g.ops)


@pytest.mark.slow
def test_param_count_equals_the_network(graphs):
    from workloads.registry import get_workload

    wl = get_workload(WORKLOAD)
    network = wl.build_network(wl.preset(PRESET))
    assert graphs["plain"].param_count == sum(int(p.size) for p in network.trainable_params())


@pytest.mark.slow
def test_recompute_adds_work_and_lowers_activations(graphs):
    plain, rc = graphs["plain"], graphs["recompute"]
    assert rc.meta["ops_by_phase"].get("recompute", 0) > 0
    assert rc.meta["flops_by_phase"]["recompute"] > 0
    assert rc.activation_bytes < plain.activation_bytes / 2


@pytest.mark.slow
def test_amp_o2_adds_casts_and_fp16_convs(graphs):
    plain, o2 = graphs["plain"], graphs["o2"]
    assert o2.meta["op_types"]["Cast"] > plain.meta["op_types"].get("Cast", 0)
    convs = [op for op in o2.ops if op.type == "Conv2D"]
    assert convs and all(op.inputs[0].dtype == "Float16" for op in convs)
    assert all(op.inputs[0].dtype == "Float32" for op in plain.ops if op.type == "Conv2D")
    assert o2.param_bytes == plain.param_bytes          # parameters stay fp32 under MindSpore AMP


@pytest.mark.slow
def test_grad_accum_unrolls_micro_batches(graphs):
    plain, accum = graphs["plain"], graphs["accum"]
    assert (accum.batch_size, accum.grad_accum) == (16, 2)
    cube = lambda g, phase: sum(op.flops for op in g.ops if op.unit == "cube" and op.phase == phase)  # noqa: E731
    # Two micro-batches of 16 do the matrix work of one batch of 32, in two copies of each op.
    assert cube(accum, "forward") == cube(plain, "forward") and cube(accum, "backward") == cube(plain, "backward")
    assert accum.meta["op_types"]["Conv2D"] == 2 * plain.meta["op_types"]["Conv2D"]
    # Summing the micro-batch gradients is update work, one Add per gradient, never forward.
    adds = [op for op in accum.ops if op.type == "Add" and op.phase == "optimizer"]
    assert len(adds) == accum.meta["trainable_tensors"]
    assert accum.meta["op_types"]["ApplyMomentum"] == plain.meta["op_types"]["ApplyMomentum"]
    # Micro-batch i+1 starts after micro-batch i's backward: only one micro-batch's activations live.
    assert accum.activation_bytes < 0.7 * plain.activation_bytes


@pytest.mark.slow
def test_cold_extraction_is_deterministic_and_cached(graphs, cache_root, tmp_path, monkeypatch):
    first = graphs["plain"]
    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path / "other-cache"))
    again = extract_graph(WORKLOAD, PRESET, {}, Settings())            # a second cold compile
    assert digest(again) == digest(first)

    def no_compile(*_args, **_kwargs):
        raise AssertionError("a cache hit must not compile")

    monkeypatch.setattr(graph_mod, "run_extract", no_compile)
    monkeypatch.setattr(graph_mod, "run_extract_batch", no_compile)      # the batched path of several missing
    assert digest(extract_graph(WORKLOAD, PRESET, {}, Settings())) == digest(first)
    # Knobs outside the graph share the entry; knobs inside get their own.
    assert extract_graph(WORKLOAD, PRESET, {}, Settings(mode="graph", workers=2)).key == first.key
    with pytest.raises(AssertionError, match="cache hit"):
        extract_graph(WORKLOAD, PRESET, {}, Settings(optimizer="adam"))


def test_key_depends_on_graph_knobs_only():
    base = graph_key(WORKLOAD, PRESET, {}, Settings())
    assert graph_key(WORKLOAD, PRESET, {}, Settings(prefetch=2, mode="graph")) == base
    assert graph_key(WORKLOAD, PRESET, {}, Settings(batch_size=8)) != base
    assert graph_key(WORKLOAD, PRESET, {"image_size": 64}, Settings()) != base
    with pytest.raises(ConfigError, match="workload"):
        graph_key("resnet-51", PRESET, {}, Settings())


@pytest.mark.slow
def test_forward_flops_of_matrix_ops(scratch):
    import numpy as np
    from mindspore import nn, ops

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, has_bias=False)
            self.fc = nn.Dense(8 * 16 * 16, 10)

        def construct(self, x):
            y = self.fc(self.conv(x).reshape(x.shape[0], -1))
            return ops.matmul(y.reshape(2, 1, 10).transpose(0, 2, 1), y.reshape(2, 1, 10))

    net = Net()
    net.set_train(True)
    expected = 2 * (2 * 8 * 16 * 16) * 27 + 2 * (2 * 10) * 2048 + 2 * (2 * 10 * 10) * 1
    assert forward_flops(net, [np.zeros((2, 3, 16, 16), np.float32)]) == expected
    assert net.training                                  # the caller's mode is restored


def test_bad_preset_is_a_config_error_before_any_compile(private_cache, monkeypatch):
    def no_compile(*_args, **_kwargs):
        raise AssertionError("must not compile")

    monkeypatch.setattr(graph_mod, "run_extract", no_compile)
    with pytest.raises(ConfigError, match="preset"):
        extract_graph(WORKLOAD, "huge", {}, Settings())
    with pytest.raises(ConfigError, match="widht"):
        extract_graph(WORKLOAD, PRESET, {"widht": 8}, Settings())


def test_extraction_child_draws_no_random_parameter_values(monkeypatch):
    """The compile-only child fills every initializer with zeros (values never reach the kernel graph; drawing
    them was most of a large LLM block's extraction). Checked on MindSpore's own initializers, restored after."""
    import numpy as np
    import mindspore as ms
    from mindspore import nn
    from mindspore.common import initializer
    from mindspore.common.initializer import Normal, TruncatedNormal, XavierUniform, initializer as make

    from hardware.model.extract import zero_filled_initializers

    for name in ("_random_normal", "_random_uniform", "_truncated_normal"):
        monkeypatch.setattr(initializer, name, getattr(initializer, name))   # restored at teardown
    drawn = ms.Parameter(make(Normal(0.02), [32, 32], ms.float32), name="drawn").asnumpy()
    assert np.count_nonzero(drawn) > 0
    zero_filled_initializers()
    for init in (Normal(0.02), TruncatedNormal(0.02), XavierUniform()):
        assert not np.any(ms.Parameter(make(init, [32, 32], ms.float32), name="p").asnumpy())
    assert not np.any(nn.Dense(16, 8).weight.asnumpy())          # HeUniform, Dense's default


@pytest.mark.slow
def test_the_compile_child_builds_and_compiles_a_step_without_filling_any_tensor():
    """`shape_only`: parameters and optimizer states (scalars such as Adam's step aside) are created without
    data and stay so through the compile (MindSpore fills them only after the graph compile, which the block
    skips), inputs are unfilled tensors of the batch's shapes and dtypes, and `Cell.init_parameters_data` is
    MindSpore's own again after."""
    code = """
import json, numpy as np, mindspore as ms
from mindspore import nn
from hardware.model.step_compile import shape_only, unfilled_tensor
ms.set_device("CPU"); ms.set_context(mode=ms.GRAPH_MODE)
fill = nn.Cell.init_parameters_data
with shape_only():
    net = nn.Dense(64, 32)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Adam(net.trainable_params()))
    inputs = [unfilled_tensor(np.zeros((8, 64), np.float32)), unfilled_tensor(np.zeros((8, 32), np.float32))]
    step.compile(*inputs)
inputs.append(unfilled_tensor(np.zeros((8, 2), np.int32)))
print(json.dumps({"params": {p.name: p.has_init for p in step.get_parameters() if p.size > 1}, "inputs": [t.has_init for t in inputs],
                  "specs": [[list(t.shape), str(t.dtype)] for t in inputs], "restored": nn.Cell.init_parameters_data is fill}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen["params"]) == 6 and all(seen["params"].values()), seen     # weight, bias, 2 Adam moments each
    assert seen["inputs"] == [True, True, True]
    assert seen["specs"] == [[[8, 64], "Float32"], [[8, 32], "Float32"], [[8, 2], "Int32"]]
    assert seen["restored"]


def test_only_mindspore_runtime_workers_are_idled(tmp_path):
    """`idle_runtime_threads` moves the threads named as MindSpore's runtime pool names its workers to
    SCHED_IDLE and leaves every other thread (here this one) as it was."""
    import threading

    from hardware.model.extract import idle_runtime_threads

    release, ready = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (ready.set(), release.wait(10)))
    worker.start()
    ready.wait(10)
    try:
        me = threading.get_native_id()
        for tid, comm in ((worker.native_id, "ActorThread_0\n"), (me, "python\n")):
            (tmp_path / str(tid)).mkdir()
            (tmp_path / str(tid) / "comm").write_text(comm)
        before = os.sched_getscheduler(me)
        assert idle_runtime_threads(tmp_path) == [worker.native_id]
        assert os.sched_getscheduler(worker.native_id) == os.SCHED_IDLE
        assert os.sched_getscheduler(me) == before
    finally:
        release.set()
        worker.join()


@pytest.mark.slow
def test_a_compile_leaves_runtime_workers_that_the_extraction_child_idles():
    """MindSpore names its runtime pool's workers as `idle_runtime_threads` expects: after one compile (no
    run) the child has an ActorThread, and the call puts it, and only the pool's threads, in SCHED_IDLE. If a
    MindSpore release renames them, this fails rather than the spinning worker silently slowing compiles."""
    code = """
import json, os, numpy as np, mindspore as ms
from mindspore import nn
from hardware.model.extract import idle_runtime_threads
ms.set_device("CPU"); ms.set_context(mode=ms.GRAPH_MODE)
net = nn.Dense(16, 8)
step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Momentum(net.trainable_params(), 0.1, 0.9))
step.compile(ms.Tensor(np.zeros((4, 16), np.float32)), ms.Tensor(np.zeros((4, 8), np.float32)))
idled = idle_runtime_threads()
tasks = {int(t): open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")}
print(json.dumps({"idled": sorted(tasks[t] for t in idled),
                  "others_idle": [n for t, n in tasks.items() if t not in idled and os.sched_getscheduler(t) == os.SCHED_IDLE],
                  "policies": sorted({os.sched_getscheduler(t) for t in idled})}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(name.startswith("ActorThread") for name in seen["idled"]), seen
    assert seen["policies"] == [os.SCHED_IDLE] and seen["others_idle"] == [], seen


def test_compile_children_are_bounded_across_cells(monkeypatch):
    """However many cells compile at once, at most COMPILE_CHILDREN extraction children run together."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    running, peak, guard = [0], [0], threading.Lock()

    def fake_child(module, request, timeout):
        with guard:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with guard:
            running[0] -= 1
        return {"n": request["n"]}

    monkeypatch.setattr(graph_mod, "run_child", fake_child)
    with ThreadPoolExecutor(max_workers=4) as cells:       # four cells, each compiling its graphs side by side
        results = list(cells.map(lambda c: graph_mod.compile_concurrently(
            [lambda n=n: graph_mod.run_extract({"n": n}) for n in range(3 * c, 3 * c + 3)]), range(4)))
    assert [r["n"] for cell in results for r in cell] == list(range(12))
    assert peak[0] == graph_mod.COMPILE_CHILDREN


def test_follow_up_compiles_join_the_queue_and_keep_both_children_busy(monkeypatch):
    """Compiles found only once others are cached (a step its template does not give) join the queue as
    chunks end; a child that finds the queue empty waits while the other may still add some, so the late
    jobs are shared, not left to one child; each job is compiled once."""
    import threading
    import time

    compiled, threads, guard = [], set(), threading.Lock()

    def fake_chunk(chunk):
        time.sleep(0.02 * len(chunk))
        with guard:
            compiled.extend(job.key for job in chunk)
            threads.add((threading.get_ident(), tuple(job.key for job in chunk)))

    job = lambda k: graph_mod.GraphCompile(k, {}, Settings())
    late = [job(f"late{i}") for i in range(6)]

    def follow_up():
        with guard:
            ready = "first0" in compiled
        return late if ready else []

    monkeypatch.setattr(graph_mod, "compile_chunk", fake_chunk)
    monkeypatch.setattr(graph_mod, "cache_has", lambda kind, key: False)
    said = []
    graph_mod.compile_missing_graphs([job(f"first{i}") for i in range(8)], lambda d, t: said.append((d, t)),
                                     follow_up=follow_up)
    assert sorted(compiled) == sorted([f"first{i}" for i in range(8)] + [f"late{i}" for i in range(6)])
    assert said[-1] == (14, 14)
    late_takers = {ident for ident, keys in threads if any(k.startswith("late") for k in keys)}
    assert len(late_takers) == graph_mod.COMPILE_CHILDREN


@pytest.mark.slow
def test_prepare_compiles_every_graph_the_cells_read_so_they_start_no_compile(tmp_path, monkeypatch, forbid_compiles):
    """The device model's `prepare` plans each cell's compiles (the two reference batches of a batch above
    them) and makes the distinct missing ones first, batched into the extraction children; the cells then
    read the cache. A knob outside the graph (workers) shares its graphs."""
    from hardware.model.target import ModelTarget
    from msbench.cell import Cell

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    cells = [Cell(workload=WORKLOAD, preset=PRESET, settings=Settings(mode="graph", **knobs))
             for knobs in ({}, {"amp_level": "O2"}, {"workers": 2})]
    target, said = ModelTarget("ascend910b"), []
    target.prepare(cells, said.append)
    assert said[0] == "compiling the 4 graphs that 3 cells read, first"
    assert said[-1] == "compiled 4 of 4 graphs"                         # a line as each chunk of compiles ends
    lines = len(said)
    forbid_compiles()
    target.prepare(cells, said.append)
    assert len(said) == lines                                                # nothing left to compile
    assert [target.run(cell).status for cell in cells] == ["ok", "ok", "ok"]


@pytest.mark.slow
def test_the_workload_table_counts_what_an_exported_network_counts(scratch):
    """`workload_forward_size` builds and compiles without parameter data in the child; the numbers must be
    those of the network built here with its weights and counted through the MindIR export."""
    import mindspore as ms

    from hardware.model.graph import workload_forward_size
    from workloads.base import trainable_parameters
    from workloads.registry import get_workload

    name = "resnet50"
    workload = get_workload(name)
    preset = workload.preset("tiny")
    network = workload.build_network(preset)
    inputs = [ms.Tensor(a) for a in workload.synthetic_batch(preset, 1)[:len(workload.columns(preset)[0])]]
    params = trainable_parameters(network)
    assert workload_forward_size(name, "tiny") == (params, forward_flops(network, inputs)) and params > 0
