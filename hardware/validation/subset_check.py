"""Is `validate --profile cpu`'s default subset representative? (`python -m hardware.validation.subset_check`)

Each cpu profile was fitted on a committed run of the whole validation matrix (40 cells, up to 6 processes
a cell, hardware/calibration/data/<profile>_validation_run.jsonl). This predicts every cell of each run with
its own profile and sets the subset's validate-cell statistics, with their 95% intervals, beside the full
set's: the subset is representative where the full set's value lies in the subset's interval. Reads only
committed data; the predictions need each cell's graph (cached; cold, one compile per graph).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from hardware.calibration.cpu_runs import measured_records
from hardware.validation.cpu import Comparison, compare, cpu_profiles, summarize
from hardware.validation.cpu_subset import quick_cells
from msbench.resources import suite_path

DATA = suite_path("hardware/calibration/data")
STATISTICS = ("step_median_abs_error", "step_spearman")


@dataclass(frozen=True)
class SubsetCheck:
    profile: str
    full: dict[str, Any]        # summarize() of the full run's validate cells
    subset: dict[str, Any]      # ... of the default subset's validate cells

    def within(self, name: str) -> bool:
        ci = self.subset.get(f"{name}_ci95")
        return ci is not None and self.full[name] is not None and ci[0] <= self.full[name] <= ci[1]


def run_file(profile: str) -> Path:
    return DATA / f"{profile.replace('-', '_')}_validation_run.jsonl"


def check(profile: str, path: Path | None = None) -> SubsetCheck:
    records = measured_records(path or run_file(profile))
    rows = [compare(r, profile) for r in records]
    chosen = {c.id for c in quick_cells([r.cell for r in records])}
    return SubsetCheck(profile, summarize(validate_rows(rows)),
                       summarize(validate_rows([r for r in rows if r.cell_id in chosen])))


def validate_rows(rows: Sequence[Comparison]) -> list[Comparison]:
    return [r for r in rows if r.split == "validate"]


def line(c: SubsetCheck) -> str:
    def stat(s: dict[str, Any], name: str, spec: str) -> str:
        ci = s.get(f"{name}_ci95")
        interval = "" if ci is None else f" [{format(ci[0], spec)}, {format(ci[1], spec)}]"
        return f"{format(s[name], spec)}{interval}"

    return (f"| `{c.profile}` | {c.full['cells']}: {stat(c.full, 'step_median_abs_error', '.1%')}, "
            f"{stat(c.full, 'step_spearman', '.3f')} | {c.subset['cells']}: "
            f"{stat(c.subset, 'step_median_abs_error', '.1%')}, {stat(c.subset, 'step_spearman', '.3f')} | "
            f"{'yes' if all(c.within(n) for n in STATISTICS) else 'NO'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware.validation.subset_check", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="append", help="a cpu profile (default: every one with a committed run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    profiles = args.profile or [p for p in cpu_profiles() if run_file(p).exists()]
    checks = [check(p) for p in profiles]
    if args.json:
        print(json.dumps([{"profile": c.profile, "full": c.full, "subset": c.subset} for c in checks], sort_keys=True))
        return 0
    print("| profile | full run, validate cells: median abs error, Spearman [95%] | default subset, validate cells "
          "| full value in subset's interval |")
    print("|---|---|---|---|")
    for c in checks:
        print(line(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
