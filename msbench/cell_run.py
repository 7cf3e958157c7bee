"""One cell, or a group of cells of one target, on that target: refused cells are recorded as `unsupported`
(never measured as if applied); the rest run in this process, or, on isolated targets (real MindSpore runs),
each in a fresh `python -m msbench.worker` process with a timeout, so that a crash, an out-of-memory kill or a
hang becomes a record. The runner (msbench.runner) and the executors call these for each cell of a matrix.
"""

from __future__ import annotations

import signal
import time
import traceback
from typing import Any, Mapping, Sequence

from msbench.cell import Cell
from msbench.child_io import call_child, child_env
from msbench.errors import UserError
from msbench.records import Metrics, Record
from msbench.repeat import MeasuresInProcesses, run_in_processes
from msbench.targets import Target, resolve_target

OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Out of memory", "out of memory", "Cannot allocate memory")
REASON_CHARS = 2000
REASON_HEAD_CHARS = 600



def clip_reason(reason: str) -> str:
    """Keep a long reason readable: its first line (what happened: the exit code, the timeout) whole, then
    the traceback from its start, with the middle cut. A plain tail loses both on a deep stack or a long
    path (a clone under a long directory name did)."""
    if len(reason) <= REASON_CHARS:
        return reason
    summary, _, detail = reason.partition("\n")
    start = detail.find("Traceback (most recent call last)")
    if start > 0:
        detail = detail[start:]
    room = max(REASON_CHARS - len(summary), 2 * REASON_HEAD_CHARS)
    if len(detail) > room:
        cut = len(detail) - room
        detail = f"{detail[:REASON_HEAD_CHARS]}\n[... {cut} characters cut ...]\n{detail[-(room - REASON_HEAD_CHARS):]}"
    return f"{summary}\n{detail}"


def failure_record(cell: Cell, status: str, reason: str) -> Record:
    return Record(cell=cell, status=status, reason=clip_reason(reason), metrics=Metrics())


def run_inline(cell: Cell, target: Target) -> Record:
    """Run in this process; exceptions become records (the traceback tail is kept as the reason)."""
    try:
        return target.run(cell)
    except MemoryError:
        return failure_record(cell, "oom", "MemoryError\n" + traceback.format_exc())
    except Exception:  # noqa: BLE001 - any failure of a cell is recorded and the run goes on
        return failure_record(cell, "failed", traceback.format_exc())


def run_isolated(cell: Cell, target_name: str, options: Mapping[str, Any], timeout: float,
                 plugins: tuple[str, ...] = ()) -> Record:
    """Run in a fresh worker process in a scratch dir (msbench.child: its process group and the dir go
    when it ends, times out, or this process dies). The allow-list travels in the request."""
    request = {"target": target_name, "options": dict(options), "plugins": list(plugins), "cell": cell.to_dict()}
    # A --allow-plugin module may sit beside the suite's packages; the real target caps oneDNN itself.
    call = call_child("msbench.worker", request, env=child_env(plugin_path=True, isa_default=False),
                      timeout=timeout, scratch_prefix=f"msbench-{cell.id}-")
    result, err = call.result, call.result.stderr
    if result.timed_out:
        return failure_record(cell, "timeout", f"no result after {timeout:g} s\n{err}")
    if result.returncode == 0 and call.answer is not None:
        return Record.from_dict(call.answer)
    if result.returncode == -signal.SIGKILL or any(m in err for m in OOM_MARKERS):
        return failure_record(cell, "oom", f"exit code {result.returncode} (killed or out of memory)\n{err}")
    return failure_record(cell, "failed", f"exit code {result.returncode}\n{err}")


def run_cell(cell: Cell, *, options: Mapping[str, Any] | None = None, isolate: bool | None = None,
             timeout: float = 1800.0, target: Target | None = None, plugins: tuple[str, ...] = (),
             wait_quiet_s: float = 0.0) -> Record:
    """One cell on its target: unsupported knobs are reported, never measured as if applied."""
    return run_cells([cell], options=options, isolate=isolate, timeout=timeout, target=target, plugins=plugins,
                     wait_quiet_s=wait_quiet_s)[0]


def run_cells(cells: Sequence[Cell], *, options: Mapping[str, Any] | None = None, isolate: bool | None = None,
              timeout: float = 1800.0, target: Target | None = None, plugins: tuple[str, ...] = (),
              wait_quiet_s: float = 0.0) -> list[Record]:
    """Cells of one target, one record each. On a target that measures in several processes
    (msbench.repeat) the supported cells are measured together, interleaved A, B, A, B ..., which is how
    an A/B pair is compared fairly; `timeout` applies to each process."""
    options = dict(options or {})
    check_timeout(timeout)
    target = target or resolve_target(cells[0].target, plugins, **options)
    started = time.time()
    records: dict[int, Record] = {}
    isolated = isolate if isolate is not None else target.isolate
    runnable = []
    for i, cell in enumerate(cells):
        reason = target.supports(cell)
        if reason:
            records[i] = failure_record(cell, "unsupported", reason)
        elif not isolated:
            records[i] = run_inline(cell, target)
        else:
            runnable.append(i)
    if runnable:
        def launch(cell: Cell) -> Record:
            return run_isolated(cell, cell.target, options, timeout, plugins)

        chosen = [cells[i] for i in runnable]
        if isinstance(target, MeasuresInProcesses):
            measured = run_in_processes(chosen, target, launch, wait_quiet_s=wait_quiet_s)
        else:
            measured = [launch(cell) for cell in chosen]
        records.update(zip(runnable, measured))
    for record in records.values():
        record.started_at, record.duration_s = started, round(time.time() - started, 3)
    return [records[i] for i in range(len(cells))]


def check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise UserError(f"--timeout={timeout!r} is not allowed; allowed: seconds, a finite number > 0")
    return timeout
