"""Do a matrix's measured numbers reproduce? Run it twice, back to back, and report per measured cell
the largest relative difference between the two runs (issue 13's goal: within 3%).

    python -m msbench.reproduce matrices/nightly.toml --target mindspore:cpu [--goal 0.03] [--set k=v]

Each pass is a fresh run (its own run file, nothing resumed), so every measured cell is measured again;
accuracy runs and graphs come from the cache and are not compared. Predicted cells (`model:`
targets) are pure functions of their inputs and are listed as such, not compared. Exit 1 when a
measured cell differs by more than the goal. Meant for a quiet machine: the runs record their load.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Iterable, Sequence

import pandas as pd

from msbench.errors import UserError
from msbench.records import Record
from msbench.runner import run_matrix
from msbench.settings import parse_assignments

GOAL = 0.03
METRICS = ("step_time_s", "throughput")


def relative_difference(a: float | None, b: float | None) -> float | None:
    """max/min - 1 of two positive numbers (how far apart, whichever is larger), None when either is missing."""
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return max(a, b) / min(a, b) - 1.0


def differences(first: Iterable[Record], second: Iterable[Record]) -> pd.DataFrame:
    """One row per cell measured ok in both runs (paired by cell id): each metric's two values and the
    largest relative difference over METRICS, largest first."""
    again = {r.cell_id: r for r in second}
    rows = []
    for r in first:
        other = again.get(r.cell_id)
        if other is None or r.status != "ok" or other.status != "ok" or r.cell.target.startswith("model:"):
            continue
        row: dict[str, object] = {"cell_id": r.cell_id, "workload": r.cell.workload, "label": r.cell.label,
                                  "target": r.cell.target}
        diffs = []
        for name in METRICS:
            a, b = getattr(r.metrics, name), getattr(other.metrics, name)
            row[f"{name} 1"], row[f"{name} 2"] = a, b
            diffs.append(relative_difference(a, b))
        known = [d for d in diffs if d is not None]
        row["largest difference"] = max(known) if known else None
        rows.append(row)
    columns = ["cell_id", "workload", "label", "target", *(f"{m} {i}" for m in METRICS for i in (1, 2)),
               "largest difference"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values("largest difference", ascending=False, na_position="last").reset_index(drop=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m msbench.reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("matrix")
    parser.add_argument("--target", help="target (default: the matrix's targets)")
    parser.add_argument("--out", default="results/runs", help="directory of the two run files")
    parser.add_argument("--goal", type=float, default=GOAL, help="largest relative difference allowed (default 0.03)")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="before each measured process, wait up to SECONDS for a quiet machine")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not 0 < args.goal < 1:
        print(f"msbench reproduce: --goal={args.goal!r} is not allowed; allowed: a fraction in (0, 1)", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%dT%H%M%S")
    try:
        extra = parse_assignments(args.set)
        runs = [run_matrix(args.matrix, target=args.target, out=args.out, run_id=f"reproduce-{stamp}-{i}",
                           extra=extra, wait_quiet_s=args.wait_quiet) for i in (1, 2)]
    except UserError as err:
        print(f"msbench reproduce: {err}", file=sys.stderr)
        return 2
    table = differences(runs[0].records, runs[1].records)
    predicted = sum(r.cell.target.startswith("model:") for r in runs[0].records)
    print(f"runs: {runs[0].path} and {runs[1].path}")
    if predicted:
        print(f"{predicted} predicted cell(s) not compared: the device model is a pure function of its inputs")
    if table.empty:
        print("no cell was measured ok in both runs: nothing to compare")
        return 1
    shown = table.assign(**{"largest difference": table["largest difference"].map(
        lambda d: "n/a" if d is None or d != d else f"{d:.1%}")})
    print(shown.to_string(index=False))
    worst = table["largest difference"].max()
    over = int((table["largest difference"] > args.goal).sum())
    print(f"largest relative difference {worst:.1%} over {len(table)} measured cell(s); "
          f"{over} above the {args.goal:.0%} goal")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
