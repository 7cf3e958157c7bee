"""Child process of an isolated cell run: read a request on stdin, run the cell, print its record.

Runs in the scratch directory its parent's `msbench.child.ChildScope` made (MindSpore writes rank_0/,
kernel_meta/ ... into the cwd); the scope removes it, even when this process is killed. The request
carries the `--allow-plugin` list: plugin targets are resolved from it, never from a file.
A crash or kill is detected by the parent from the exit status and stderr.
"""

from __future__ import annotations

import json
import sys

from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.runner import RECORD_PREFIX
from msbench.targets import resolve_target


def main() -> int:
    request = json.loads(sys.stdin.read())
    cell = Cell.from_dict(request["cell"])
    target = resolve_target(request["target"], tuple(request.get("plugins", ())), **request.get("options", {}))
    try:
        record = target.run(cell)
    except MemoryError:
        record = Record(cell=cell, status="oom", reason="MemoryError", metrics=Metrics())
    sys.stdout.write("\n" + RECORD_PREFIX + record.to_json_line())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
