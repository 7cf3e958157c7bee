"""Hand-built records for the report tests: known numbers, so table values can be checked exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msbench.cell import Cell
from msbench.records import Metrics, Record
from msbench.settings import make_settings

GIB = 1 << 30
BASE = {"mode": "graph", "batch_size": 32, "workers": 8}
PROVENANCE = {"mindspore": "2.10.0", "numpy": "1.26.4", "python": "3.11.7",
              "cpu": {"model": "x", "cores": 2, "flags": ["avx2", "avx512f"]}}


def record(workload: str = "resnet50", target: str = "model:ascend910b", *, status: str = "ok",
           reason: str | None = None, thr: float | None = None, peak_gib: float | None = None,
           acc: float | None = None, breakdown: dict[str, float] | None = None, commit: str = "c1" * 20,
           started: float = 1.0, provenance: dict[str, Any] | None = None, **knobs: Any) -> Record:
    values = {**BASE, **knobs}
    label = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(knobs.items())
                     if BASE.get(k) != v) or "base"
    cell = Cell(workload=workload, preset="full", settings=make_settings(values), target=target, label=label)
    step = None if thr is None else values["batch_size"] * values.get("grad_accum", 1) * values.get("devices", 1) / thr
    metrics = Metrics(throughput=thr, step_time_s=step,
                      peak_memory_bytes=None if peak_gib is None else int(peak_gib * GIB),
                      accuracy=acc, breakdown=breakdown or {}, bound=max(breakdown, key=breakdown.get) if breakdown else None)
    return Record(cell=cell, status=status, reason=reason, metrics=metrics, started_at=started,
                  provenance={**PROVENANCE, **(provenance or {}), "commit": commit})


def bd(compute: float, memory: float = 0.005, host: float = 0.002, data: float = 0.001) -> dict[str, float]:
    return {"compute": compute, "memory": memory, "host": host, "data": data}


def claims_records(target: str = "model:ascend910b", scale: float = 1.0, **common: Any) -> list[Record]:
    """One workload's cells covering every claim; `scale` multiplies every throughput."""
    def r(**kw: Any) -> Record:
        kw["thr"] = kw["thr"] * scale if kw.get("thr") is not None else None
        return record(target=target, **common, **kw)
    return [
        r(thr=1000, peak_gib=20, acc=0.700, breakdown=bd(0.025)),
        r(thr=1800, peak_gib=11, acc=0.697, breakdown=bd(0.012), amp_level="O2"),
        r(thr=700, peak_gib=20, acc=0.700, breakdown=bd(0.025, host=0.015), mode="pynative"),
        r(thr=1100, peak_gib=19, acc=0.700, breakdown=bd(0.022), graph_kernel=True),
        r(thr=1200, peak_gib=20.5, acc=0.700, breakdown=bd(0.025, host=0.0), sink=True),
        r(thr=350, peak_gib=20, acc=0.700, breakdown=bd(0.025, data=0.09), workers=1),
        r(thr=850, peak_gib=14, acc=0.700, breakdown=bd(0.030), recompute="selective"),
        r(thr=1000, peak_gib=20.5, acc=0.702, breakdown=bd(0.1), grad_accum=4),
        r(thr=1050, peak_gib=60, acc=0.705, breakdown=bd(0.1), batch_size=128),
        r(thr=7000, peak_gib=20, acc=0.700, breakdown=bd(0.025), devices=8),
        r(status="oom", reason="needs 80 GiB of 64", batch_size=512),
    ]


def write_asv(root: Path, commit: str, date: int, throughput: list[float | None]) -> Path:
    """An asv results directory of the project's suite (track_throughput over workload x variant x target)."""
    name = "matrix_cells.Performance.track_throughput"
    params = [["'resnet50@full'"], ["'base'", "'amp_level=O2'"], ["'model:ascend910b'"]]
    (root / "box").mkdir(parents=True, exist_ok=True)
    (root / "benchmarks.json").write_text(json.dumps({name: {
        "name": name, "type": "track", "param_names": ["workload", "variant", "target"], "params": params,
        "unit": "samples/s", "version": "1"}, "version": 2}))
    (root / "box" / f"{commit[:8]}-env.json").write_text(json.dumps({
        "commit_hash": commit, "env_name": "env", "date": date, "params": {"machine": "box"}, "version": 2,
        "result_columns": ["result", "params", "version", "started_at", "duration"],
        "results": {name: [throughput, params, "1", 0, 0.1]}}))
    return root
