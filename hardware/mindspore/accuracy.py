"""Accuracy of a cell: train its workload's accuracy preset (`accuracy` where the workload defines one,
else `tiny`; a tiny cell keeps its own tiny preset) for the preset's epochs with the cell's numerics knobs,
on the CPU, then evaluate. Cached on disk by content key.

Only the knobs that change the numbers are kept (`NUMERICS_KNOBS`); speed-only knobs (mode, jit,
workers, sink...) are reset, so cells differing only in those share one run. Data parallelism over
d devices is trained as d accumulated micro-batches in one process: the same samples per update,
the same per-micro-batch BatchNorm statistics and the same averaged gradient.

Runs in a child process (`python -m hardware.mindspore.accuracy`, cell JSON on stdin, result JSON
on stdout) so that neither the real target's measured process nor the device model's is polluted
by a second network, another global context, or its memory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from hardware.capabilities import NUMERICS
from msbench.cache import cache_get, cache_lock, cache_put, cached, content_key, source_hash
from msbench.child_io import call_child, child_env, serve
from msbench.cell import Cell
from msbench.host_share import shared_host
from msbench.resources import suite_path
from msbench.settings import Settings, make_settings

NUMERICS_KNOBS = NUMERICS        # the capability table's knobs that change a run's numbers
# Seeds per accuracy (matrix key `accuracy_seeds`): a tiny run's accuracy moves by whole percentage points
# with the seed, so a delta is the mean of seed-paired differences with its t-interval (msbench.stats).
ACCURACY_SEEDS = 3               # tiny-preset runs per accuracy unless the matrix's `accuracy_seeds` says otherwise
CACHE_KIND = "accuracy"
# The preset a workload may define for accuracy runs alone: sized for the paired interval of a delta per
# CPU-second (docs/accuracy.md), apart from `tiny`, which tests and the committed CPU measurements train.
ACCURACY_PRESET = "accuracy"
# What the accuracy phase of the nightly cost and how precise its deltas are (python -m msbench.accuracy_budget).
BUDGET_FILE = suite_path("hardware") / "calibration" / "data" / "accuracy_budget.json"


# An fp16 training costs this many times an fp32 one of the same preset on the CPU backend: estimate, range
# 2-2.5 (docs/accuracy.md; the budget file's medians mix both). It only orders the accuracy phase's trainings,
# dearest first, so that two lanes end together; no recorded number depends on it.
FP16_COST = 2.25


@dataclass
class AccuracyResult:
    value: float | None                 # the workload's headline metric in [0, 1]; None when not computable
    metric: str
    reason: str | None = None           # why value is None
    metrics: dict[str, float] = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)
    epochs: int = 0
    steps: int = 0
    samples_seen: int = 0
    key: str = ""
    cached: bool = False
    lr_rule: str = ""                   # the learning-rate rule applied (workloads.train_step.lr_rule)
    train_s: float | None = None        # seconds the child spent building, training and evaluating it
    cpu_s: float | None = None          # user + system CPU seconds of the same (all the child's threads)
    preset: str = ""                    # the preset trained (accuracy_preset)


def accuracy_settings(settings: Settings) -> Settings:
    """The cell's numerics knobs, everything else at its default (graph mode: numerically identical
    to PyNative on this backend, and faster)."""
    knobs: dict[str, Any] = {k: getattr(settings, k) for k in NUMERICS_KNOBS}
    knobs["grad_accum"] = settings.grad_accum * settings.data_parallel   # one micro-batch per model replica
    knobs["mode"] = "graph"
    return make_settings(knobs)


def not_run_reason(settings: Settings, knobs: tuple[str, ...] | None) -> str | None:
    """Why a cell gets no accuracy run under a matrix's `accuracy_knobs` (None: it gets one). Its run
    may differ from the defaults' run only in those knobs (data parallelism counts as grad_accum)."""
    if knobs is None:
        return None
    ours, default = accuracy_settings(settings), accuracy_settings(Settings())
    off = [k for k in NUMERICS_KNOBS if k not in knobs and k != "seed" and getattr(ours, k) != getattr(default, k)]
    if not off:
        return None
    return (f"accuracy not run: the matrix's accuracy_knobs ({', '.join(knobs)}) leave out "
            + ", ".join(f"{k}={getattr(ours, k)}" for k in off)
            + (" (data parallelism trains as accumulated micro-batches)" if settings.devices > 1 else ""))


def accuracy_cell_settings(cell: Cell, workload: Any) -> Settings:
    """`accuracy_settings` for a cell whose preset may not be tiny: there the batch knob acts as a ratio to
    that preset's own batch, so a full-size cell at its usual batch trains the tiny preset at the tiny
    batch (not at 256 on a split of 1,024), and doubling the full batch doubles the tiny one."""
    settings = accuracy_settings(cell.settings)
    if cell.preset == "tiny" or settings.batch_size is None:
        return settings
    own = workload.preset(cell.preset, cell.overrides).batch_size
    tiny = workload.preset(*accuracy_preset(cell, workload)).batch_size
    return settings.replace(batch_size=max(1, round(tiny * settings.batch_size / own)))


def seed_cells(cell: Cell, seeds: int) -> list[Cell]:
    """The cell at seeds seed, seed + 1, ...: the i-th is paired with the baseline's i-th."""
    if seeds < 1:
        raise ValueError(f"seeds={seeds} is not allowed; allowed: an integer >= 1")
    first = cell.settings.seed
    return [cell if i == 0 else replace(cell, settings=cell.settings.replace(seed=first + i)) for i in range(seeds)]


def accuracy_preset(cell: Cell, workload: Any) -> tuple[str, dict[str, Any]]:
    """A tiny cell trains its own tiny preset with its overrides; any other cell the workload's accuracy
    preset where it has one (else tiny), without overrides (they size the other preset, not this one)."""
    if cell.preset == "tiny":
        return "tiny", dict(cell.overrides)
    return (ACCURACY_PRESET if ACCURACY_PRESET in workload.presets() else "tiny"), {}


def workload_sources(workload: Any) -> list[Path]:
    """What the accuracy depends on: the workload's package (a `workloads/<family>/` folder) or, for a
    workload outside it, its `source_files()` (module and presets file; a zoo adapter's also the zoo's
    sources); plus the shared top-level modules of workloads/ (base, pipeline, train_step, shared
    family code)."""
    import inspect

    module_file = Path(inspect.getfile(type(workload))).resolve()
    in_family = module_file.parent.parent == suite_path("workloads")
    own = [module_file.parent] if in_family else []
    own += [p for p in workload.source_files() if not (in_family and p.resolve().is_relative_to(module_file.parent))]
    return [*own, *sorted(suite_path("workloads").glob("*.py")), Path(__file__)]


def accuracy_key(cell: Cell) -> str:
    # lazy: on the CLI's startup path (the matrix checks accuracy knobs); the training modules load when a run trains
    from hardware.mindspore.resolve import load_workload

    workload = load_workload(cell.workload)
    preset, overrides = accuracy_preset(cell, workload)
    return content_key("accuracy/1", metadata.version("mindspore"), cell.workload, preset, overrides,
                       source_hash(workload_sources(workload)), accuracy_cell_settings(cell, workload).non_default())


def measure_accuracy(cell: Cell) -> AccuracyResult:
    """Train and evaluate in this process (sets MindSpore's global context: call it in a child)."""
    return cached_accuracy(cell, lambda: asdict(train_and_evaluate(cell)))


def accuracy_in_subprocess(cell: Cell, timeout: float = 1800.0) -> AccuracyResult:
    """`train_and_evaluate` in a fresh process in a scratch directory (a cache hit needs no process)."""
    return accuracies_in_subprocess([cell], timeout)[0]


def accuracies_in_subprocess(cells: list[Cell], timeout: float = 1800.0, threads: int | None = None
                             ) -> list[AccuracyResult]:
    """The cells' accuracies (the seeds of one setting): cached ones read, the others trained one after
    another in ONE fresh child on one compiled step, re-initialised per seed (workloads.reseed), so
    MindSpore's import, start-up, the compile and the data generation are paid once, not once a seed. Each key's lock is held meanwhile, so
    a parallel cell sharing a key waits and reads it. `threads`: the child's CPU op threads (None: the host's)."""
    keys = [accuracy_key(c) for c in cells]
    with contextlib.ExitStack() as held:
        for key in sorted(set(keys)):              # one order for everyone: no deadlock between cells
            held.enter_context(cache_lock(CACHE_KIND, key))
        hits = {k: hit for k in set(keys) if (hit := cache_get(CACHE_KIND, k, valid_result)) is not None}
        todo = list(dict.fromkeys(k for k in keys if k not in hits))
        fresh: dict[str, dict[str, Any]] = {}
        if todo:
            firsts = [cells[keys.index(k)] for k in todo]
            for key, result in zip(todo, run_accuracy_child(firsts, timeout, threads)):
                fresh[key] = {**result, "key": key}
                if result["value"] is not None:       # a run that could not produce a number is not kept
                    cache_put(CACHE_KIND, key, fresh[key])
    return [AccuracyResult(**{**(hits.get(k) or fresh[k]), "cached": k in hits}) for k in keys]


def valid_result(result: dict[str, Any]) -> bool:
    return AccuracyResult(**result).value is not None


def cached_accuracy(cell: Cell, run: Callable[[], dict[str, Any]]) -> AccuracyResult:
    """The cached result for the cell's accuracy key, else `run()`'s, computed once when parallel cells
    share the key; a run that could not produce a number (value None, with its reason) is not kept."""
    key = accuracy_key(cell)
    entry, hit = cached(CACHE_KIND, key, lambda: {**run(), "key": key}, keep=lambda result: result["value"] is not None,
                        validate=valid_result)
    return AccuracyResult(**{**entry, "cached": hit})


def train_and_evaluate(cell: Cell, built: dict[str, Any] | None = None, threads: int | None = None) -> AccuracyResult:
    """Train the accuracy preset and evaluate it, in this process (no cache). `built` keeps the compiled step
    of each setting between calls, so the next seed of that setting reuses it (workloads.reseed)."""
    # lazy: on the CLI's startup path (the matrix checks accuracy knobs); the training modules load when a run trains
    from hardware.mindspore.backend import apply_context, plan_context, unsupported_reason
    from hardware.mindspore.resolve import load_workload
    from workloads.reseed import ReusableStep, reseed, unseeded
    from workloads.train_step import build_train_step, lr_rule, step_batch_size, steps_per_epoch, train

    workload = load_workload(cell.workload)
    settings = accuracy_cell_settings(cell, workload)
    preset_name, overrides = accuracy_preset(cell, workload)
    preset = workload.preset(preset_name, overrides)
    reason = unsupported_reason(settings, "cpu")
    if reason is None and step_batch_size(preset, settings) > preset.train_samples:
        reason = (f"{step_batch_size(preset, settings)} samples per step exceed the {preset.train_samples} "
                  f"training samples of {cell.workload}'s tiny preset")
    if reason:
        return AccuracyResult(value=None, metric=workload.metric_name, reason=f"accuracy run impossible: {reason}",
                              preset=preset_name)
    apply_context(plan_context(settings, "cpu", threads))
    built = {} if built is None else built
    setting = content_key(cell.workload, preset_name, overrides, unseeded(settings))
    if setting in built:
        step = reseed(built[setting], workload, preset, settings)
    else:
        step = build_train_step(workload, preset, settings, preset.epochs * steps_per_epoch(preset, settings))
        built[setting] = ReusableStep.of(step, settings)
    run = train(workload, preset, settings, preset.epochs, workdir=Path.cwd() / "data", step=step)
    metrics = {k: float(v) for k, v in workload.evaluate(run.network, preset).items()}
    return AccuracyResult(value=metrics[workload.metric_name], metric=workload.metric_name, metrics=metrics,
                          losses=run.losses, epochs=preset.epochs, steps=run.steps, samples_seen=run.samples_seen,
                          lr_rule=lr_rule(preset, settings, preset.epochs * steps_per_epoch(preset, settings)),
                          preset=preset_name)


def run_accuracy_child(cells: list[Cell], timeout: float, threads: int | None = None) -> list[dict[str, Any]]:
    """`python -m hardware.mindspore.accuracy` on the cells, one after another: their AccuracyResults as
    dicts. The child and its scratch directory die with this process (msbench.child)."""
    # Each seed compiles afresh (a new network in the child): with MindSpore's compile cache shared by the seeds of one setting, the toy
    # workload's AMP O2 + dynamic loss scale run averaged 42% top-1 over seeds 1-3 from an empty cache
    # against > 55% compiled fresh (tests/hardware/test_mindspore_target.py), so a cached compile changes numerics.
    call = call_child("hardware.mindspore.accuracy", {"cells": [c.to_dict() for c in cells], "threads": threads},
                      env=child_env(plugin_path=True, extra=thread_env(threads)), timeout=timeout * len(cells),
                      scratch_prefix="msbench-accuracy-", around=shared_host)
    workload = cells[0].workload
    if call.result.timed_out:
        raise RuntimeError(f"accuracy run of {workload} timed out after {timeout * len(cells):g} s")
    if call.result.returncode != 0 or call.answer is None or len(call.answer) != len(cells):
        raise RuntimeError(f"accuracy run of {workload} failed (exit {call.result.returncode}): "
                           f"{call.result.stderr[-2000:]}")
    return list(call.answer)


def training_cost(cell: Cell, seeds: int) -> float:
    """The CPU seconds the cell's seeds will likely take to train, from the budget file's median for its
    workload (0 when it has none), to start the dearest trainings first."""
    median = (budget_medians().get(cell.workload) or 0.0) * seeds
    return median * (FP16_COST if cell.settings.amp_level not in (None, "O0") else 1.0)


@functools.cache
def budget_medians() -> dict[str, float | None]:
    """Each workload's median CPU seconds a training in the committed budget file (empty when unreadable)."""
    try:
        budget = json.loads(BUDGET_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: entry.get("cpu_s_median") for name, entry in budget.get("workloads", {}).items()}


def thread_env(threads: int | None) -> dict[str, str]:
    """oneDNN's OpenMP threads to match the op threads of a child that shares the host (none: inherited)."""
    return {} if threads is None else {"OMP_NUM_THREADS": str(threads)}


def cpu_seconds() -> float:
    """User + system CPU of this process, all its threads (MindSpore's kernels and dataset workers)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The child's answer: each cell's AccuracyResult, trained one after another in this process on one
    compiled step per setting, reused by its seeds."""
    built: dict[str, Any] = {}
    results = []
    for data in request["cells"]:
        started, cpu = time.monotonic(), cpu_seconds()
        result = train_and_evaluate(Cell.from_dict(data), built, request.get("threads"))
        result.train_s = round(time.monotonic() - started, 2)
        result.cpu_s = round(cpu_seconds() - cpu, 2)
        results.append(asdict(result))
    return results


if __name__ == "__main__":
    sys.exit(serve(answer))
