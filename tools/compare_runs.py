"""Compare two run files cell by cell, leaving out what depends on when and where a cell ran (times,
provenance, run id: tests/support/ray_loopback.comparable) and, with --code-changed, the fingerprint (a hash
of the source files that produced the record: any edit of them changes it by design). For a restructuring
that must not change predictions: `python tools/compare_runs.py --code-changed OLD.jsonl NEW.jsonl` prints
each differing cell and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from ray_loopback import comparable  # noqa: E402

from msbench.store import RunStore  # noqa: E402


def cells(path: Path, drop: tuple[str, ...]) -> dict[str, dict]:
    return {r.cell_id: {k: v for k, v in comparable(r).items() if k not in drop} for r in RunStore(path).load()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--code-changed", action="store_true", help="leave out the records' source fingerprint")
    args = parser.parse_args()
    drop = ("fingerprint",) if args.code_changed else ()
    old, new = cells(args.old, drop), cells(args.new, drop)
    differ = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
    for cell_id in differ:
        a, b = old[cell_id], new[cell_id]
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{cell_id}: differs in {', '.join(keys)}")
        for k in keys:
            print(f"  old {k}: {json.dumps(a.get(k), sort_keys=True)[:300]}")
            print(f"  new {k}: {json.dumps(b.get(k), sort_keys=True)[:300]}")
    only = sorted(old.keys() ^ new.keys())
    print(f"{len(old)} old cells, {len(new)} new, {len(old.keys() & new.keys()) - len(differ)} equal, "
          f"{len(differ)} differ, {len(only)} in one file only")
    return 1 if differ or only else 0


if __name__ == "__main__":
    sys.exit(main())
