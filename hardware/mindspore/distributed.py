"""`devices > 1`: data parallel through `msrun`, one rank per device, each rank a measured session.

The target writes a request file and launches `msrun --worker_num=N ... distributed.py <request>`;
every rank runs `init()`, sets the cell's parallel plan (workloads/parallel_plan.py: DATA_PARALLEL
with mean gradients, the step cell then reducing them with `nn.DistributedGradReducer`; or the
semi-auto/auto plan of an LLM on Ascend), takes its shard of the data, measures with the common
protocol, and writes its numbers. The stopping rule is agreed by an AllReduce so every rank runs
the same number of steps (a rank that stopped alone would leave the others hanging in a collective).
The cell's step time is the slowest rank's median: a synchronous update waits for it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hardware.mindspore.backend import apply_context, plan_context
from hardware.mindspore.config import MeasureConfig
from hardware.mindspore.dataset_cache import free_port
from hardware.mindspore.memory import MemoryReport
from msbench.cell import Cell
from msbench.child import ChildScope
from msbench.child_io import ANSWER, child_env, read_message, write_message
from msbench.records import Record, StepStats
from hardware.mindspore.measure import make_metrics, per_step, stop_reason
from workloads.parallel_plan import apply_context as apply_parallel_context, plan_parallel
from hardware.mindspore.session import run_session

REQUEST_FILE = "msrun_request.json"
LOG_DIR = "msrun_log"


def msrun_binary() -> Path:
    return Path(sys.executable).with_name("msrun")


def msrun_command(world: int, port: int, request: Path, log_dir: Path) -> list[str]:
    return [str(msrun_binary()), f"--worker_num={world}", f"--local_worker_num={world}", f"--master_port={port}",
            "--join=True", f"--log_dir={log_dir}", str(Path(__file__).resolve()), str(request)]


def run_distributed(cell: Cell, device: str, config: MeasureConfig) -> Record:
    world = cell.settings.devices
    request = Path.cwd() / REQUEST_FILE
    write_message(request, {"cell": cell.to_dict(), "device": device, "config": asdict(config),
                            ANSWER: str(Path.cwd())})
    log_dir = Path.cwd() / LOG_DIR
    # msrun starts ranks with `python` from PATH: make it this interpreter
    env = child_env(extra={"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])})
    with ChildScope() as scope:     # msrun and its ranks: one process group, gone with this process
        proc = scope.run(msrun_command(world, free_port(), request, log_dir), env=env, cwd=Path.cwd())
    ranks = [Path.cwd() / f"rank{r}.json" for r in range(world)]
    if proc.returncode != 0 or not all(p.exists() for p in ranks):
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(log_dir.glob("worker_*.log")))
        raise RuntimeError(f"msrun exited {proc.returncode}; ranks without results: "
                           f"{[p.name for p in ranks if not p.exists()]}\n{proc.stderr[-1000:]}\n{logs}")
    return combine(cell, device, [read_message(p) for p in ranks])


def combine(cell: Cell, device: str, ranks: list[dict[str, Any]]) -> Record:
    """One record from every rank's numbers: the slowest rank's step time, the largest rank's memory.
    A rank times calls; under dataset sink one call runs `steps_per_call` optimizer steps (a sink round),
    so its times are divided by that count, as for a single-device session (`target.per_step`)."""
    unsupported = [r["unsupported"] for r in ranks if r.get("unsupported")]
    if unsupported:
        return Record(cell=cell, status="unsupported", reason=unsupported[0])
    def step_median(rank: dict[str, Any]) -> float:
        return rank["stats"]["median"] / rank.get("steps_per_call", 1)

    slowest = max(ranks, key=step_median)
    biggest = max(ranks, key=lambda r: r["memory"]["headline_bytes"] or 0)
    per_call = int(slowest.get("steps_per_call", 1))
    metrics = make_metrics(stats=per_step(StepStats(**slowest["stats"]), per_call), data_s=slowest["data_s"] / per_call,
                           compile_s=slowest["compile_s"], global_samples=slowest["global_samples"],
                           step_batch=slowest["step_batch"], memory=MemoryReport(**biggest["memory"]),
                           extra={**slowest["extra"], "device": device, "ranks": len(ranks), "steps_per_call": per_call,
                                  "slowest_rank": slowest["rank"], "rank_medians": [step_median(r) for r in ranks]})
    return Record(cell=cell, status="ok", metrics=metrics)


def rank_main(request_path: str) -> int:
    """One rank (run by msrun, which passes no stdin: the request is a file, its answer rank<N>.json in the
    request's answer directory, one file per rank since each writes its own)."""
    request = read_message(Path(request_path))
    cell = Cell.from_dict(request["cell"])
    config = MeasureConfig(**request["config"])
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank, init


    apply_context(plan_context(cell.settings, request["device"]))
    init()
    rank, world = get_rank(), get_group_size()
    apply_parallel_context(plan_parallel(cell.settings, world))
    all_reduce = ms.ops.AllReduce()

    def agreed_stop(samples: list[float], elapsed: float, cfg: MeasureConfig) -> str | None:
        mine = stop_reason(samples, elapsed, cfg)
        votes = int(all_reduce(ms.Tensor([1.0 if mine else 0.0], ms.float32)).asnumpy()[0])
        return (mine or "another rank's stopping rule") if votes == world else None

    result = run_session(cell, request["device"], config, rank=rank, world=world, stop=agreed_stop,
                         context_applied=True)
    out: dict[str, Any] = {"rank": rank, "unsupported": result.unsupported}
    if not result.unsupported:
        m = result.measurement
        out.update(stats=asdict(m.stats), steps_per_call=result.steps_per_call, compile_s=m.compile_s, data_s=m.data_s,
                   step_batch=result.step_batch,
                   global_samples=result.global_samples, memory=asdict(result.memory), extra=result.extra)
    write_message(Path(request[ANSWER], f"rank{rank}.json"), out)
    return 0


if __name__ == "__main__":
    sys.exit(rank_main(sys.argv[1]))
