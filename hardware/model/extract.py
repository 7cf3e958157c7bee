"""Graph extraction: compile (never run) a MindSpore graph and parse its IR dump.

`python -m hardware.model.extract` reads one JSON request on stdin and writes the analysed graph
as its JSON answer (msbench.child_io, the one child transport). MindSpore reads `MS_DEV_SAVE_GRAPHS` once, at import, so the
dump can only be switched on in a fresh process; `hardware.model.graph` starts this one with a
clean environment and a scratch working directory, so callers never import MindSpore for it.

Requests:
- `{"kind": "train_step", "workload", "preset", "overrides", "settings"}`: the real training step
  of `workloads.train_step.build_train_step`, compiled in GRAPH mode on one synthetic batch.
- `{"kind": "mindir", "path", "inputs": [{"dtype", "shape"}]}`: an exported forward network.
- `{"kind": "forward", "workload", "preset"}`: a workload's network in eval mode on one synthetic sample, built
  here without parameter data (the workload table's sizes: no weights drawn, exported or written).
- `{"kind": "llm_part", ...}`: one rank's LLM block or ends (hardware/model/llm/parts.py).
- `{"kind": "batch", "requests": [...]}`: several of those, one after another in this one process (MindSpore
  is imported once), answered as `{"results": [{"result": ...} or {"error": "..."}]}`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hardware.model.dataflow import analyse
from hardware.model.ir import read_dumps
from hardware.model.step_compile import built_step, compile_step, shape_only, unfilled_tensor
from msbench.child_io import SCRATCH, serve

DUMP_PASS = "hwopt_common_final_graph"


def dump_env(dump_dir: Path) -> dict[str, str]:
    """The environment that makes MindSpore write only the final kernel graph of each compile."""
    return {"MS_DEV_SAVE_GRAPHS": "1", "MS_DEV_DUMP_IR_PASSES": DUMP_PASS,
            "MS_DEV_SAVE_GRAPHS_PATH": str(dump_dir)}


def compile_train_step(request: dict[str, Any]) -> dict[str, Any]:
    """Build the real step for the cell and compile it on a synthetic batch of the micro-batch size."""
    # Inside: importing a workload imports MindSpore, which must come after answer() set dump_env.
    from msbench.settings import make_settings
    from workloads.registry import get_workload

    # One device: data-parallel communication is the device model's own business (comm.py), and a
    # DistributedGradReducer cannot be built without a communication group.
    settings = make_settings({**request["settings"], "devices": 1})
    workload = get_workload(request["workload"])
    return compile_step(workload, workload.preset(request["preset"], request.get("overrides") or {}), settings)


def compile_mindir(request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import mindspore as ms
    from mindspore import nn

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    cell = nn.GraphCell(ms.load(request["path"]))
    cell.compile(*[ms.Tensor(np.zeros(t["shape"], dtype=t["dtype"])) for t in request["inputs"]])
    return {"trainable": []}


def compile_forward(request: dict[str, Any]) -> dict[str, Any]:
    """The forward graph of a workload's network on one sample, as `forward_flops` would export and compile it
    (eval mode, the network's input columns), but built and compiled here without parameter data."""
    import mindspore as ms

    # Inside: importing a workload imports MindSpore, which must come after answer() set dump_env.
    from workloads.base import trainable_parameters
    from workloads.registry import get_workload

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    workload = get_workload(request["workload"])
    preset = workload.preset(request["preset"])
    network = built_step(lambda: workload.build_network(preset))
    network.set_train(False)
    n_inputs = len(workload.columns(preset)[0])
    with shape_only():
        network.compile(*[unfilled_tensor(a) for a in workload.synthetic_batch(preset, 1)[:n_inputs]])
    return {"trainable": [], "trainable_elements": trainable_parameters(network)}   # used in its forward or not


def zero_filled_initializers() -> None:
    """Parameter values never reach the kernel graph (a compile reads shapes and dtypes only), and drawing
    them was the largest cost of a large extraction: 13 of the 30 s of a Llama 2 70B block at
    tensor_parallel 2 (0.43 G normal samples). MindSpore's initializers all draw through three C functions
    of `mindspore.common.initializer`; in this compile-only child they fill zeros instead."""
    from mindspore.common import initializer

    def zeros(_seed: int, array: Any, *_params: float) -> None:
        array.fill(0.0)

    for name in ("_random_normal", "_random_uniform", "_truncated_normal"):
        setattr(initializer, name, zeros)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The child's answer to one request (or a batch); its scratch directory receives the IR dumps."""
    dump_dir = Path(request[SCRATCH])
    for key, value in dump_env(dump_dir).items():
        os.environ[key] = value                      # before the first `import mindspore`
    zero_filled_initializers()
    if request["kind"] == "batch":
        return {"results": [batch_item(item, dump_dir) for item in request["requests"]]}
    return compiled_graph(request, dump_dir)


def batch_item(request: dict[str, Any], dump_dir: Path) -> dict[str, Any]:
    """One request of a batch: its graph, or the error it raised (the parent compiles that one again alone,
    to report it as it would any failed compile)."""
    try:
        return {"result": compiled_graph(request, dump_dir)}
    except Exception as err:      # noqa: BLE001 - reported to the parent, which re-runs the request alone
        return {"error": f"{type(err).__name__}: {err}"}


def compiled_graph(request: dict[str, Any], dump_dir: Path) -> dict[str, Any]:
    """Compile one request and analyse the kernel graph it dumped. The dumps are removed after, so the next
    request of a batch reads only its own (MindSpore reads the dump directory once, at import)."""
    try:
        if request["kind"] == "llm_part":             # one rank's LLM block or ends (hardware/model/llm/parts.py)
            from hardware.model.llm.parts import compile_llm_part   # imports MindSpore: after dump_env

            compiled = compile_llm_part(request)
        else:
            compiled = {"train_step": compile_train_step, "mindir": compile_mindir,
                        "forward": compile_forward}[request["kind"]](request)
        idle_runtime_threads()
        dumps = sorted(dump_dir.rglob(f"{DUMP_PASS}_*.ir"))
        if not dumps:
            raise RuntimeError(f"MindSpore wrote no {DUMP_PASS} dump under {dump_dir}")
        analysis = analyse(read_dumps(dumps))
    finally:
        for dump in dump_dir.rglob(f"{DUMP_PASS}_*.ir"):
            dump.unlink()
    names = set(compiled["trainable"])
    trainable = [p for p in analysis.weight_params if p.ref_key in names]
    import mindspore as ms

    return {
        "mindspore": ms.__version__,
        "ops": [_op_dict(op) for op in analysis.ops],
        "activation_bytes": analysis.activation_bytes,
        "param_count": sum(p.spec.elements for p in trainable if p.spec),
        "param_bytes": sum(p.spec.nbytes for p in trainable if p.spec),
        "state_bytes": sum(p.spec.nbytes for p in analysis.weight_params if p.spec),
        "meta": {**analysis.meta, "kernel_graphs": len(dumps), "trainable_tensors": len(trainable)},
        **{k: v for k, v in compiled.items() if k != "trainable"},
    }


RUNTIME_THREADS = ("ActorThread", "KernelThread")       # MindSpore's runtime thread pool (libmindspore_core)


def idle_runtime_threads(tasks: Path = Path("/proc/self/task")) -> list[int]:
    """Put MindSpore's runtime worker threads of this process in the idle scheduling class; their ids.

    The first compile builds the graph's actors and starts the runtime pool; a graph that is never run
    never lowers the pool's spin count, so its worker spins on sched_yield for the rest of the child's life
    (gdb: ActorThread_0 in __GI_sched_yield, ~83% of a core through every later compile). Two extraction
    children on two cores then share them with two spinners: compiles 2 and 3 of a ResNet-50 step took
    ~14 s instead of ~10.5 s. SCHED_IDLE threads run only on a core nothing else wants, and nothing here
    runs a graph, so the spin costs no compile time. A no-op where the kernel has no such class or no /proc."""
    if not hasattr(os, "SCHED_IDLE") or not tasks.is_dir():
        return []
    idled = []
    for task in tasks.iterdir():
        try:
            if task.joinpath("comm").read_text().startswith(RUNTIME_THREADS):
                os.sched_setscheduler(int(task.name), os.SCHED_IDLE, os.sched_param(0))
                idled.append(int(task.name))
        except (OSError, ValueError):                 # the thread ended meanwhile
            continue
    return idled


def _op_dict(op: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(op)


if __name__ == "__main__":
    sys.exit(serve(answer))
