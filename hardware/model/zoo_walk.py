"""Extract every mindcv model the `mindcv:` adapter offers (`python -m hardware.model.zoo_walk`).

A peer network is only useful if msbench's extraction was not written with it in mind, so the walk
compiles each model's real training step (tiny preset, graph mode) through the one extraction path the
device model uses (`hardware.model.graph`: cached, a chunk of compiles per child) and records, per model,
whether it extracted and, where not, the first line of why. Models the adapter refuses are recorded with
the adapter's reason. tests/workloads/test_zoo_walk.py walks a sample, or every model with
MSBENCH_ZOO_WALK=all; docs/workloads.md reports the counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from hardware.model.graph import ExtractionError, compile_missing_graphs, compiled_graph, train_step_compile
from msbench.errors import ConfigError, UserError
from msbench.settings import Settings, make_settings
from workloads.zoo.mindcv import offered_models, module_of

PRESET = "tiny"
CHUNK = 8                      # models per round of compiles: results are written as each round ends


@dataclass(frozen=True)
class WalkResult:
    """One model's outcome: `ok` (extracted), `refused` (the adapter says why) or `failed` (the compile's error)."""

    model: str
    module: str
    status: str
    reason: str = ""
    ops: int = 0
    param_count: int = 0


def walk_settings() -> Settings:
    return make_settings({"mode": "graph"})


def first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def walk(models: Sequence[str], settings: Settings | None = None) -> Iterator[WalkResult]:
    """Each model's outcome, in chunks of CHUNK compiled together (MindSpore imported once per child)."""
    settings = settings or walk_settings()
    for start in range(0, len(models), CHUNK):
        chunk = models[start:start + CHUNK]
        jobs, refused = {}, {}
        for model in chunk:
            try:
                jobs[model] = train_step_compile(f"mindcv:{model}", PRESET, {}, settings)
            except (ConfigError, UserError) as err:
                refused[model] = first_line(err)
        compile_missing_graphs(jobs.values())
        for model in chunk:
            yield outcome(model, jobs.get(model), refused.get(model, ""))


def outcome(model: str, job: object, refusal: str) -> WalkResult:
    if job is None:
        return WalkResult(model, module_of(model), "refused", refusal)
    try:
        graph = compiled_graph(job)  # type: ignore[arg-type]
    except ExtractionError as err:
        return WalkResult(model, module_of(model), "failed", first_line(err))
    return WalkResult(model, module_of(model), "ok", ops=len(graph.ops), param_count=graph.param_count)


def one_per_module(models: Iterable[str]) -> list[str]:
    """The first model (by name) of each mindcv module: every architecture family once."""
    seen: dict[str, str] = {}
    for model in sorted(models):
        seen.setdefault(module_of(model), model)
    return sorted(seen.values())


def counts(results: Sequence[WalkResult]) -> dict[str, int]:
    out = {"models": len(results)}
    for r in results:
        out[r.status] = out.get(r.status, 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hardware.model.zoo_walk", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON Lines file: one outcome per model")
    parser.add_argument("--sample", action="store_true", help="one model per mindcv module, not every model")
    parser.add_argument("--models", nargs="*", help="these models only")
    args = parser.parse_args(argv)
    models = args.models or (one_per_module(offered_models()) if args.sample else offered_models())
    done = set()
    if args.out.exists():                       # resumable: a model already recorded is not walked again
        done = {json.loads(line)["model"] for line in args.out.read_text().splitlines() if line.strip()}
    todo = [m for m in models if m not in done]
    results = []
    with args.out.open("a") as fh:
        for r in walk(todo):
            fh.write(json.dumps(asdict(r), sort_keys=True) + "\n")
            fh.flush()
            results.append(r)
            print(f"{r.model:<28} {r.status:<8} {r.reason}", flush=True)
    print(json.dumps(counts(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
