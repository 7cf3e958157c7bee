"""The accuracy phase of a matrix on its own: train every distinct accuracy run its cells need (one child per
numerics setting, as `msbench run` trains them after its predictions: two settings at once on two CPUs), and say what it
cost and how precise the claims' deltas came out. Writes the committed summary that
docs/generated/accuracy.md shows (`python -m msbench.docs_gen accuracy`).

    python -m msbench.accuracy_budget matrices/nightly.toml [--seeds N] [--workload NAME] [--out FILE]

Numerics do not depend on the target, so one target's cells are enough; the accuracy cache is used as
usual (run it with an empty `$MSBENCH_CACHE` to measure a cold phase).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from hardware.mindspore.accuracy import BUDGET_FILE
from hardware.model.target import ModelTarget
from msbench.accuracy_phase import add_accuracies
from msbench.matrix_file import load_matrix
from msbench.records import Record


def accuracy_records(matrix_path: str, seeds: int | None,
                     workloads: Sequence[str] = ()) -> tuple[list[Any], float, float]:
    """The matrix's ok cells on its first target (of `workloads`, default all), each with its accuracy added
    by the accuracy phase `msbench run` uses (cached runs shared, the same lanes and threads), and the wall
    and CPU seconds that took."""
    matrix = load_matrix(matrix_path)
    target = matrix.targets[0]
    cells = [e.cell for e in matrix.expand().entries if e.status == "ok" and e.cell.target == target
             and (not workloads or e.cell.workload in workloads)]
    profile = target.split(":", 1)[1] if target.startswith("model:") else "ascend910b"   # numerics: any will do
    model = ModelTarget(profile, accuracy=True, accuracy_seeds=seeds or matrix.accuracy_seeds,
                        accuracy_knobs=matrix.accuracy_knobs, defer_accuracy=True)
    started, cpu = time.monotonic(), process_cpu_s()
    records: list[Any] = []
    add_accuracies([Record(cell=cell, status="ok") for cell in cells], {target: model}, lambda r: None,
                   records.append, lambda r: None)
    return records, time.monotonic() - started, process_cpu_s() - cpu


def process_cpu_s() -> float:
    """User + system CPU of this process and its finished children (the accuracy children: start-up,
    MindSpore's import, data generation and the trainings)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def trainings(records: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """Per workload, each distinct training run (by accuracy key) with its value, CPU and wall seconds."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        run = record.metrics.extra.get("accuracy_run") or {}
        for key, value, cpu, wall in zip(run.get("keys", []), run.get("values", []), run.get("cpu_s", []),
                                         run.get("wall_s", [])):
            out.setdefault(record.cell.workload, {}).setdefault(key, {
                "label": record.cell.label, "value": value, "cpu_s": cpu, "wall_s": wall, "preset": run.get("preset"),
                "reason": run.get("reason")})
    return {w: list(runs.values()) for w, runs in out.items()}


def summarize(records: Sequence[Any], wall_s: float, seeds: int, cpu_s: float | None = None) -> dict[str, Any]:
    # pandas: the report's frames load only for the budget's summary
    from msbench.report.accuracy_widths import DIFFS, half_widths_by_seeds, widths_table
    from msbench.report.claims import CLAIMS
    from msbench.report.load import RecordSet

    widths = widths_table(RecordSet.of(list(records)).frame, CLAIMS)
    runs = trainings(records)
    trained = [r for rs in runs.values() for r in rs if r["cpu_s"] and r["value"] is not None]
    workloads = {}
    for workload, rs in sorted(runs.items()):
        cpu = [r["cpu_s"] for r in rs if r["cpu_s"] and r["value"] is not None]
        mine = widths[widths["workload"] == workload]
        workloads[workload] = {
            "preset": next((r["preset"] for r in rs if r["preset"]), ""),
            "trainings": len(cpu),
            "cpu_s_median": round(statistics.median(cpu), 2) if cpu else None,
            "cpu_s_max": round(max(cpu), 2) if cpu else None,
            "values": sorted(round(float(r["value"]), 4) for r in rs if r["value"] is not None),
            "reason": next((r["reason"] for r in rs if r["value"] is None and r["reason"]), None),
            "deltas": [{"delta": row["delta"], "pairs": int(row["pairs"]), "delta_pp": round(float(row["delta_pp"]), 2),
                        "half_width_pp": None if row["half_width_pp"] is None else round(float(row["half_width_pp"]), 2),
                        "half_width_by_seeds": {str(n): round(w, 2) for n, w in half_widths_by_seeds(row[DIFFS]).items()}}
                       for _, row in mine.iterrows()],
        }
    return {"seeds": seeds, "trainings": len(trained), "phase_wall_s": round(wall_s, 1),
            "phase_cpu_s": None if cpu_s is None else round(cpu_s, 1),
            "training_cpu_s": round(sum(r["cpu_s"] for r in trained), 1), "workloads": workloads}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msbench.accuracy_budget", description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per setting (default: the matrix's)")
    parser.add_argument("--workload", action="append", default=[], help="only this workload's cells (repeatable)")
    parser.add_argument("--out", type=Path, default=BUDGET_FILE)
    args = parser.parse_args(argv)
    records, wall, cpu = accuracy_records(args.matrix, args.seeds, args.workload)

    summary = summarize(records, wall, args.seeds or load_matrix(args.matrix).accuracy_seeds, cpu)
    summary["matrix"] = args.matrix
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
