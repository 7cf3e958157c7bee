"""The nightly matrix over a two-node Ray cluster on loopback, timed cold and warm, and compared cell by cell
with a local run: the measurement behind docs/ray.md's "same records" and its wall times.

    .venv/bin/python tools/ray_nightly_loopback.py [--matrix matrices/nightly.toml] [--work /tmp/rayloop]

Two nodes of one CPU each (a model cell asks for one CPU, so two cells run at a time, as `--jobs 2` would
locally), both on this machine and sharing one msbench cache, as a cluster whose nodes mount one shared
cache would. Cold: an empty cache; warm: the same matrix again under a new run id. Then the local executor
runs it under a third run id from the warm cache, and the records must be equal but for when and where each
cell ran. Prints one JSON object; exit 1 when the records differ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from ray_loopback import DRIVER_PATH, ROOT, comparable, loopback_cluster  # noqa: E402

from msbench.store import RunStore  # noqa: E402


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of `cmd`, which must succeed (its output goes to this process's)."""
    start = time.monotonic()
    subprocess.run(cmd, env=env, cwd=cwd, check=True)
    return round(time.monotonic() - start, 1)


def records(path: Path) -> dict[str, dict]:
    return {r.cell_id: comparable(r) for r in RunStore(path).load()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", default=str(ROOT / "matrices" / "nightly.toml"))
    parser.add_argument("--target", help="one target instead of the matrix's own")
    parser.add_argument("--work", default="/tmp/rayloop", help="scratch folder: cache, run files (emptied first)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    (work / "elsewhere").mkdir(parents=True)
    env = {**os.environ, "MSBENCH_CACHE": str(work / "cache"), "PYTHONPATH": DRIVER_PATH}
    msbench = [sys.executable, "-m", "msbench.cli", "run", args.matrix, "--out", str(work / "runs"), "--quiet",
               *(["--target", args.target] if args.target else [])]
    times: dict[str, float] = {}
    with loopback_cluster([["--num-cpus=1"]], head_cpus=1, env={"MSBENCH_CACHE": str(work / "cache")}) as cluster:
        ray = ["--executor", "ray", "--address", cluster.address]
        driver_env = cluster.driver_env({"MSBENCH_CACHE": str(work / "cache")})
        for run_id in ("ray-cold", "ray-warm"):
            times[run_id] = timed([*msbench, *ray, "--run-id", run_id], driver_env, cluster.outside)
    times["local-warm"] = timed([*msbench, "--jobs", "2", "--run-id", "local-warm"], env, work / "elsewhere")
    runs = {run_id: records(work / "runs" / f"{run_id}.jsonl") for run_id in times}
    local = runs["local-warm"]
    differ = {run_id: sorted(k for k in local.keys() | found.keys() if local.get(k) != found.get(k))
              for run_id, found in runs.items() if run_id != "local-warm"}
    print(json.dumps({"matrix": args.matrix, "cells": len(local), "wall_s": times,
                      "cells_differing_from_local": {k: len(v) for k, v in differ.items()},
                      "first_differing": {k: v[:5] for k, v in differ.items()}}, indent=1))
    return 1 if any(differ.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
