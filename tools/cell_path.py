"""How many of the suite's files one device-model cell passes through from the runner to its record (issue 40's
"following one cell" measure): the cell is predicted once to warm every cache, then again under a profiler hook
that notes each first-party function the first time it is called, as a reader following the cell through the
code meets it. Printed: the distinct files, the functions, and how often that reading returns to a file it had
already left (a function of file F met after functions of other files since F was last read).

    MSBENCH_CACHE=DIR python tools/cell_path.py [WORKLOAD] [--target model:ascend910a] [--set KNOB=V ...] [--list]

Reads nothing from disk that the prediction does not; a cold cache only makes the first, untraced run slow.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from msbench.cell import Cell
from msbench.cell_run import run_cell
from msbench.settings import make_settings, parse_assignments
from workloads.recipes import recipe_for

PACKAGES = ("msbench", "hardware", "workloads")


def suite_file(filename: str, roots: tuple[Path, ...]) -> str | None:
    """`hardware/model/plan.py` for a file of the suite's packages, else None."""
    path = Path(filename)
    for root in roots:
        if path.is_relative_to(root):
            return str(path.relative_to(root.parent))
    return None


def traced_files(cell: Cell) -> list[str]:
    """The suite file of each first-party function in the order the runner first calls it on `cell` (warm)."""
    roots = tuple(Path(sys.modules[name].__file__).resolve().parent for name in PACKAGES)  # type: ignore[arg-type]
    order: list[str] = []
    seen: set[object] = set()

    def hook(frame, event, _arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call" and frame.f_code not in seen:
            seen.add(frame.f_code)
            name = suite_file(frame.f_code.co_filename, roots)
            if name is not None:
                order.append(name)

    sys.setprofile(hook)
    try:
        record = run_cell(cell)
    finally:
        sys.setprofile(None)
    if record.status not in ("ok", "oom"):
        raise SystemExit(f"{cell.workload}: {record.status}: {record.reason}")
    return order


def returns(order: list[str]) -> int:
    """Functions met in a file that the reading had left for another file before (a run of one file counts once)."""
    left: set[str] = set()
    count, previous = 0, None
    for name in order:
        if name != previous:
            count += name in left
            if previous is not None:
                left.add(previous)
            previous = name
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="resnet50")
    parser.add_argument("--target", default="model:ascend910a")
    parser.add_argument("--set", dest="set", action="append", default=[], metavar="KNOB=VALUE")
    parser.add_argument("--list", action="store_true", help="also list the files in first-call order")
    args = parser.parse_args()
    recipe = recipe_for(args.workload, "full", "recipe")
    settings = make_settings({**(dict(recipe.settings) if recipe else {}), **parse_assignments(args.set)})
    cell = Cell(workload=args.workload, preset="full", settings=settings, target=args.target)
    run_cell(cell)                                        # warm: graphs, host costs, profiles
    order = traced_files(cell)
    distinct = list(dict.fromkeys(order))
    print(f"{cell.workload} on {cell.target} ({cell.id}): {len(distinct)} files, {returns(order)} returns "
          f"to a file already left, {len(order)} functions")
    if args.list:
        print("\n".join(distinct))
    return 0


if __name__ == "__main__":
    sys.exit(main())
