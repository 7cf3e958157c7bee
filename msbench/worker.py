"""Child process of an isolated cell run: read a request on stdin, run the cell, answer its record
(msbench.child_io, the one child transport).

Runs in the scratch directory its parent's `msbench.child.ChildScope` made (MindSpore writes rank_0/,
kernel_meta/ ... into the cwd); the scope removes it, even when this process is killed. The request
carries the `--allow-plugin` list: plugin targets are resolved from it, never from a file.
A crash or kill is detected by the parent from the exit status and stderr.
"""

from __future__ import annotations

import sys
from typing import Any

from msbench.cell import Cell
from msbench.child_io import serve
from msbench.records import Metrics, Record
from msbench.targets import resolve_target


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The cell's record, as a dict (msbench.records.Record.to_dict)."""
    cell = Cell.from_dict(request["cell"])
    target = resolve_target(request["target"], tuple(request.get("plugins", ())), **request.get("options", {}))
    try:
        record = target.run(cell)
    except MemoryError:
        record = Record(cell=cell, status="oom", reason="MemoryError", metrics=Metrics())
    return record.to_dict()


if __name__ == "__main__":
    sys.exit(serve(answer))
