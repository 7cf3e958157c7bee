"""What a cold `make bench` has to do before and after its prediction table (issue 42's time budget): the
distinct graph compiles a matrix's device-model cells read (none compiled twice: cells whose knobs leave the
graph unchanged share one; then those whose batch rules their template does not give, once the first are cached) and the accuracy training groups (the cells that share one setting's seed runs).
The cost of each is measured elsewhere (docs/accuracy.md); this lists what there is to pay for.

    python tools/bench_work.py [MATRIX] [--list]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

from hardware.model.graph import graph_plan
from hardware.model.outcome import refusal_before
from msbench.matrix_file import load_matrix
from msbench.records import Record
from msbench.targets import resolve_target

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", nargs="?", default=str(ROOT / "matrices" / "nightly.toml"))
    parser.add_argument("--list", action="store_true", help="one line per compile and per training group")
    args = parser.parse_args()
    matrix = load_matrix(args.matrix)
    targets = {name: resolve_target(name, (), accuracy=matrix.accuracy, accuracy_seeds=matrix.accuracy_seeds,
                                    accuracy_knobs=matrix.accuracy_knobs) for name in matrix.targets}
    compiles: dict[str, list[str]] = collections.defaultdict(list)
    groups: dict[str, list[str]] = collections.defaultdict(list)
    underived: dict[str, list[str]] = collections.defaultdict(list)
    cells = untrained = 0
    for entry in matrix.expand().entries:
        if entry.status != "ok":
            continue
        cells += 1
        cell, target = entry.cell, targets[entry.cell.target]
        name = f"{cell.workload} {cell.label} ({cell.target})"
        if not refusal_before(target.plan(cell)):
            plan = graph_plan(cell.workload, cell.preset, cell.overrides, cell.settings)
            for job in plan.compiles():
                compiles[f"{job.key[:10]} {job.request['workload']} {job.request.get('overrides') or ''}"].append(name)
            for job in plan.underived():
                underived[f"{job.key[:10]} {job.request['workload']} {job.request.get('overrides') or ''}"].append(name)
        group = target.accuracy_group(Record(cell=cell, status="ok")) if matrix.accuracy else None
        if group is None:
            untrained += 1
        else:
            groups[f"{group[:10]} {cell.workload}"].append(name)
    per_workload = collections.Counter(key.split()[1] for key in compiles)
    print(f"{cells} cells: {len(compiles)} distinct graph compiles ({', '.join(f'{w} {n}' for w, n in sorted(per_workload.items()))}); "
          f"{len(groups)} accuracy training groups, {untrained} cells train nothing")
    print(f"then {len(underived)} compiles of steps their template's batch rules do not give (known only where the "
          "first compiles are cached: $MSBENCH_CACHE)")
    if args.list:
        for what, table in (("compile", compiles), ("compile after", underived), ("training group", groups)):
            for key, users in sorted(table.items(), key=lambda kv: kv[0].split()[1:]):
                print(f"{what} {key}: {len(users)} cells, e.g. {users[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
