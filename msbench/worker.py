"""Child process of an isolated cell run: read a request on stdin, run the cell, print its record.

Runs in a scratch directory (MindSpore writes rank_0/, kernel_meta/ ... into the cwd), removed after.
A crash or kill is detected by the parent from the exit status and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.runner import RECORD_PREFIX
from msbench.targets import resolve_target


def main() -> int:
    request = json.loads(sys.stdin.read())
    cell = Cell.from_dict(request["cell"])
    target = resolve_target(request["target"], **request.get("options", {}))
    scratch = tempfile.mkdtemp(prefix=f"msbench-{cell.id}-")
    home = os.getcwd()
    os.chdir(scratch)
    try:
        try:
            record = target.run(cell)
        except MemoryError:
            record = Record(cell=cell, status="oom", reason="MemoryError", metrics=Metrics())
    finally:
        os.chdir(home)
        shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.write("\n" + RECORD_PREFIX + record.to_json_line())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
