"""The asv suite: thin classes whose parameters are the cells of a matrix (see matrix_cells.py).

asv takes this folder from the working tree and installs the msbench package of each benchmarked
commit, so everything that can change a number (workloads, device model, runner) comes from the
commit; this folder only names cells and reads their records. MindSpore is never imported here.

Environment: MSBENCH_MATRIX (default matrices/nightly.toml), MSBENCH_TARGET (default
model:ascend910b), MSBENCH_ASV_RUNS (keep each commit's records there; default: asv's temp dir),
MSBENCH_ALLOW_PLUGINS (comma-separated `module:Class` targets to trust: the asv path's `--allow-plugin`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MATRIX = "matrices/nightly.toml"
DEFAULT_TARGET = "model:ascend910b"
PARAM_NAMES = ["workload", "variant", "target"]
SKIP_STATUSES = ("unsupported", "invalid", "oom")      # a fact about the cell: asv shows n/a
Table = dict[tuple[str, str, str], dict[str, Any]]


def matrix_path() -> Path:
    path = Path(os.environ.get("MSBENCH_MATRIX") or DEFAULT_MATRIX)
    return path if path.is_absolute() else REPO / path


def target() -> str:
    return os.environ.get("MSBENCH_TARGET") or DEFAULT_TARGET


def plugins() -> tuple[str, ...]:
    """Plugin targets the caller trusts (a matrix file alone never makes a name code)."""
    return tuple(p.strip() for p in os.environ.get("MSBENCH_ALLOW_PLUGINS", "").split(",") if p.strip())


def matrix_params() -> list[list[str]]:
    """asv params [workloads, variants, targets] in matrix order; combinations that are not cells are skipped."""
    from msbench.matrix_file import load_matrix
    from msbench.tracked import cell_key

    keys = [cell_key(e.cell) for e in load_matrix(matrix_path(), target=target(), plugins=plugins()).expand().entries
            if e.status != "excluded"]
    return [list(dict.fromkeys(k[i] for k in keys)) for i in range(len(PARAM_NAMES))]


def evaluate_matrix() -> Table:
    """Run every cell once (asv's setup_cache: once per commit) and keep its tracked metrics by cell key."""
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    from msbench.runner import run_matrix
    from msbench.store import RunStore
    from msbench.tracked import cell_key, tracked_values

    out = os.environ.get("MSBENCH_ASV_RUNS") or "runs"     # asv runs setup_cache in a temp dir it removes
    result = run_matrix(matrix_path(), target=target(), out=out, progress=False, plugins=plugins())
    table: Table = {}
    for record in RunStore(result.path).load():
        table[cell_key(record.cell)] = {"status": record.status, "reason": (record.reason or "").strip(),
                                        **tracked_values(record.metrics)}
    return table


def cell_metrics(table: Table, workload: str, variant: str, target_name: str, needs: tuple[str, ...]) -> dict[str, Any]:
    """The cell's row for asv's `setup`: NotImplementedError skips it (n/a), other errors fail it."""
    row = table.get((workload, variant, target_name))
    if row is None:
        raise NotImplementedError("not a cell of the matrix")
    if row["status"] in SKIP_STATUSES:
        raise NotImplementedError(f"{row['status']}: {row['reason'][:200]}")
    if row["status"] != "ok":
        raise RuntimeError(f"cell {row['status']}: {row['reason'][-2000:]}")
    missing = [m for m in needs if row.get(m) is None]
    if missing:
        raise NotImplementedError(f"the target reported no {', '.join(missing)}")
    return row
