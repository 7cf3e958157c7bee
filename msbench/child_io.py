"""The one transport of every child process msbench starts (the isolated worker, graph extraction, host-cost
and pipeline-mode measurement, the accuracy run, msrun's ranks), and the one place its environment is built.

One message shape: the parent writes a JSON request on the child's stdin; the child writes one JSON answer
to the file the request names (`request[ANSWER]`), never to stdout, so MindSpore's own prints cannot corrupt
it; the parent reads it with `read_message`. msrun's ranks each write their own answer file (one per rank,
named by the rank; msrun passes them no stdin, so their request is a file too), read by the same reader. The process lifetime (scratch directory, process groups,
watchdog) is msbench.child's; this module is only what travels.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

from msbench.child import ChildResult, ChildScope
from msbench.resources import child_pythonpath

ANSWER = "out"              # the request key naming the answer file
SCRATCH = "dump_dir"        # the request key naming a fresh directory inside the scope's scratch dir
ANSWER_FILE = "result.json"
ISA_ENV = "ONEDNN_MAX_CPU_ISA"
ISA_DEFAULT = "AVX2"        # oneDNN's reference convolutions on AVX-512 hosts are 30-100x slower (backend.isa_env)
# Variables that would change what a child compiles or dumps; compile children start without them.
UNCLEAN_ENV = ("MS_DEV_", "MS_COMPILER_CACHE", "MS_ENABLE_GRAPH_KERNEL")


class ChildError(RuntimeError):
    """A child process failed or timed out; the message carries its stderr tail."""


@dataclass(frozen=True)
class ChildCall:
    """What came back: the child's answer (None when it wrote none) and how it ended."""

    answer: Any
    result: ChildResult


def child_env(*, compile_clean: bool = False, isa_default: bool = True, plugin_path: bool = False,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: this process's, with PYTHONPATH naming the suite's packages wherever they
    are unpacked (msbench.resources) and, with `plugin_path`, the working directory (a --allow-plugin module
    beside them). `compile_clean` drops MindSpore's compile/dump switches (a graph is compiled as the runner
    would compile it); `isa_default` caps oneDNN at AVX2 unless the user set a cap (the measured worker does
    not: the real target decides it per host and records it, hardware.mindspore.backend.isa_env)."""
    env = {k: v for k, v in os.environ.items() if not (compile_clean and k.startswith(UNCLEAN_ENV))}
    if isa_default:
        env.setdefault(ISA_ENV, ISA_DEFAULT)
    env["PYTHONPATH"] = child_pythonpath(*([os.getcwd()] if plugin_path else []))
    return {**env, **(extra or {})}


def call_child(module: str, request: Any, *, env: Mapping[str, str], timeout: float | None,
               scratch_prefix: str = "msbench-child-", around: Callable[[], ContextManager[Any]] = nullcontext
               ) -> ChildCall:
    """Run `python -m <module>` in a fresh scratch directory (MindSpore writes rank_0/ etc. into the cwd) with
    `request` (a JSON object; ANSWER and SCRATCH are added) on stdin, and read its answer. `around` is held
    while the child runs (e.g. msbench.host_share.shared_host). The child and the directory die with this
    process (msbench.child)."""
    with ChildScope(scratch_prefix) as scope, around():
        work = scope.scratch
        assert work is not None
        out = work / ANSWER_FILE
        message = {**request, SCRATCH: str(work / "ir"), ANSWER: str(out)}
        result = scope.run([sys.executable, "-m", module], input=json.dumps(message), env=env, timeout=timeout)
        answer = read_message(out) if out.exists() and not result.timed_out else None
    return ChildCall(answer, result)


def run_child(module: str, request: Mapping[str, Any], timeout: float) -> Any:
    """`call_child` for a child that must answer: its answer, or ChildError with its stderr tail."""
    call = call_child(module, request, env=child_env(compile_clean=True), timeout=timeout)
    if call.result.timed_out:
        raise ChildError(f"timed out after {timeout:.0f} s")
    if call.result.returncode != 0 or call.answer is None:
        tail = "\n".join(call.result.stderr.strip().splitlines()[-15:])
        raise ChildError(f"failed (exit {call.result.returncode}):\n{tail}")
    return call.answer


def read_message(path: Path) -> Any:
    """The one reader of a message file: a child's answer (or msrun's request, which its ranks read)."""
    return json.loads(path.read_text())


def write_message(path: str | Path, message: Any) -> None:
    """A child's answer (or msrun's request), as JSON, to a file."""
    Path(path).write_text(json.dumps(message, sort_keys=True))


def serve(handle: Callable[[dict[str, Any]], Any]) -> int:
    """A child's main: the request from stdin, `handle`'s answer to the request's answer file."""
    request = json.loads(sys.stdin.read())
    write_message(request[ANSWER], handle(request))
    return 0
