"""The op graph of a cell's real training step, and the forward FLOPs of any network.

Both compile (never run) real MindSpore graphs in a child process (`hardware.model.extract`) that
dumps and parses the final kernel-graph IR, so callers never import MindSpore for it and the IR
environment variables are clean. Extracted graphs are cached on disk by a content key: the
MindSpore version, the workload's source, the preset and its overrides, and every knob that
changes the compiled graph.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from hardware.capabilities import graph_knobs
from msbench.cache import cache_dir, cache_get, cache_has, cache_lock, cache_put, cached, content_key, source_hash
from msbench.child_io import ChildError, run_child
from msbench.host_share import shared_host
from msbench.settings import Settings
from hardware.model.batch_template import derive_batch
from hardware.model.opgraph import OpGraph
from hardware.model.scaling import REFERENCE_BATCHES, REFERENCE_DEPTHS, scale_batch, scale_depth
from msbench.errors import ConfigError
from workloads.recipes import recipe_for
from workloads.registry import get_workload
from workloads.train_step import micro_batch_size
from workloads.registry import workload_sources as sources

CACHE_KIND = "opgraph"
SCHEMA = 1                       # bump when the OpGraph layout changes (parser edits change PARSER_SOURCES)
# The knobs that change the compiled step, from the capability table (mode/jit level/fusion/data knobs
# do not: the graph is always compiled the same way and fusion is applied by `fusion.py`; devices by `comm.py`).
GRAPH_KNOBS = graph_knobs()
EXTRACT_TIMEOUT_S = 600.0
# Compile children of this process at once, whatever the number of cells running: a compile is single-threaded
# enough that one per core keeps the host busy, and a large LLM part's child holds several GB while it runs.
COMPILE_CHILDREN = max(1, min(2, os.cpu_count() or 1))
COMPILE_SLOTS = threading.BoundedSemaphore(COMPILE_CHILDREN)
MIN_CHUNK = 4          # compiles per child at least: a child's MindSpore import is about one small compile
# Editing the parser invalidates cached graphs too (SCHEMA is for layout changes of OpGraph itself).
PARSER_SOURCES = tuple(Path(__file__).with_name(name) for name in ("ir.py", "dataflow.py", "extract.py",
                                                                         "step_compile.py", "cpu_optimizers.py"))


# Graphs already read in this process, by (cache directory, key): a matrix predicts many cells of one
# graph (every profile, every knob outside GRAPH_KNOBS), and parsing the JSON costs ~10 ms.
_LOADED: dict[tuple[str, str], OpGraph] = {}


class ExtractionError(RuntimeError):
    """MindSpore failed to compile the graph (a bug or an unsupported network, not a user error)."""


class GraphNotCached(LookupError):
    """A cache-only lookup (`compile_missing=False`, e.g. the report's re-predictions) found no entry."""


@functools.cache
def mindspore_version() -> str:
    try:
        return metadata.version("mindspore")
    except metadata.PackageNotFoundError:  # pragma: no cover - the project depends on it
        return "absent"


def workload_sources(workload: str) -> list[Path]:
    """The workload's sources (a plugin's too) plus the shared step builder, base and pipeline: editing any
    changes the key (workloads/registry.py)."""
    return sources(workload)


def check_preset(workload: str, preset: str, overrides: Mapping[str, Any]) -> None:
    """Refuse an unknown preset or override here, as a ConfigError, before a child process is started."""
    get_workload(workload).preset(preset, overrides)


def graph_key(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings) -> str:
    knobs = {k: getattr(settings, k) for k in GRAPH_KNOBS}
    return content_key("opgraph", SCHEMA, mindspore_version(), source_hash(workload_sources(workload)),
                       source_hash(PARSER_SOURCES), workload, preset, dict(overrides), knobs)


def extract_graph(workload: str, preset: str, overrides: Mapping[str, Any] | None, settings: Settings,
                  compile_missing: bool = True) -> OpGraph:
    """The OpGraph of one cell's training step. Its cost does not grow with the cell: above the reference
    batches, and for stacks of identical blocks deeper than the reference depths, it is scaled exactly
    from small cached extractions (hardware/model/scaling.py); otherwise one compile in a child process.
    `compile_missing=False` never compiles: a graph not in the cache raises GraphNotCached."""
    overrides = dict(overrides or {})
    check_preset(workload, preset, overrides)
    key = graph_key(workload, preset, overrides, settings)
    memo_key = (str(cache_dir(CACHE_KIND)), key)
    if memo_key in _LOADED:
        return _LOADED[memo_key]
    plan = graph_plan(workload, preset, overrides, settings)
    if compile_missing:
        compile_missing_graphs(plan.compiles())
    graph = None
    if plan.depths:
        shallow = [batch_graph(workload, preset, o, settings, plan.micro, compile_missing) for o in plan.depths]
        graph = scale_depth(*shallow, plan.depth)
    graph = graph or batch_graph(workload, preset, overrides, settings, plan.micro, compile_missing)
    graph = dataclasses.replace(graph, key=key, meta={**graph.meta, "graph_knobs": graph_knobs(settings)})
    _LOADED[memo_key] = graph
    return graph


@dataclass(frozen=True)
class GraphPlan:
    """The compiles one cell's graph is made of, known before any is made: the cell's batch, or the two
    reference batches above them (the second derived where its template, the recipe's step, gives its batch
    rules: `template_settings`), at its own depth or at the two reference depths of a deeper stack (a
    fallback compile at the cell's batch, where two references do not scale, is made when it is needed)."""
    workload: str
    preset: str
    overrides: dict[str, Any]
    settings: Settings
    micro: int                              # the cell's micro-batch
    depth: int                              # blocks per identical stack; 0 when none is scaled
    depths: list[dict[str, Any]]            # the overrides of the reference depths (empty: its own depth)

    def compiles(self) -> list["GraphCompile"]:
        """The cell's own step at the first reference batch and its template's at both (the template is the
        cell's own settings where they are the template: then the two batches of its own step)."""
        if self.micro <= REFERENCE_BATCHES[-1]:
            return [train_step_compile(self.workload, self.preset, o, self.settings) for o in self.depths or [self.overrides]]
        small, large = (dataclasses.replace(self.settings, batch_size=b) for b in REFERENCE_BATCHES)
        template = template_settings(self.workload, self.preset, large)
        return [train_step_compile(self.workload, self.preset, o, s) for o in self.depths or [self.overrides]
                for s in dict.fromkeys([small, dataclasses.replace(template, batch_size=small.batch_size), template])]


    def second_references(self) -> list[tuple[dict[str, Any], Settings]]:
        """The (overrides, settings) of each step at the second reference batch that is derived from its
        template rather than compiled (none where the cell's settings are their own template)."""
        if self.micro <= REFERENCE_BATCHES[-1]:
            return []
        large = dataclasses.replace(self.settings, batch_size=REFERENCE_BATCHES[1])
        if template_settings(self.workload, self.preset, large) == large:
            return []
        return [(o, large) for o in self.depths or [self.overrides]]

    def underived(self) -> list["GraphCompile"]:
        """Once `compiles()` are cached: the steps at the second reference batch that their template could not
        give after all (batch_template.derive_batch refused). Not those whose graphs are not all cached."""
        out = []
        for overrides, large in self.second_references():
            with contextlib.suppress(GraphNotCached):
                if (job := underived_compile(self.workload, self.preset, overrides, large)) is not None:
                    out.append(job)
        return out


def underived_compile(workload: str, preset: str, overrides: dict[str, Any], large: Settings) -> "GraphCompile | None":
    """The compile of the step at the second reference batch `large` where its template does not give it,
    else None; GraphNotCached while the graphs that decide it are not all cached."""
    if derived_reference(workload, preset, overrides, large, compile_missing=False) is None:
        return train_step_compile(workload, preset, overrides, large)
    return None


def underived_follow_up(plans: Sequence[GraphPlan]) -> Callable[[], list["GraphCompile"]]:
    """For `compile_missing_graphs`: each call, the compiles of the steps at the second reference batch that
    their template does not give, among those whose deciding graphs are cached by now (each decided once)."""
    pending = {train_step_compile(p.workload, p.preset, o, large).key: (p.workload, p.preset, o, large)
               for p in plans for o, large in p.second_references()}

    def found() -> list[GraphCompile]:
        out = []
        for key, unit in list(pending.items()):
            try:
                job = underived_compile(*unit)
            except GraphNotCached:
                continue
            del pending[key]
            if job is not None:
                out.append(job)
        return out
    return found


def graph_plan(workload: str, preset: str, overrides: Mapping[str, Any] | None, settings: Settings) -> GraphPlan:
    overrides = dict(overrides or {})
    wl = get_workload(workload)
    full = wl.preset(preset, overrides)
    stacks = {f: getattr(full, f) for f in wl.identical_blocks if getattr(full, f) > 0}
    deep = len(set(stacks.values())) == 1 and max(stacks.values()) > REFERENCE_DEPTHS[-1]
    depths = [{**overrides, **dict.fromkeys(stacks, d)} for d in REFERENCE_DEPTHS] if deep else []
    return GraphPlan(workload, preset, overrides, settings, micro_batch_size(full, settings),
                     max(stacks.values()) if deep else 0, depths)


def batch_graph(workload: str, preset: str, overrides: dict[str, Any], settings: Settings, micro: int,
                compile_missing: bool = True) -> OpGraph:
    """The graph at micro-batch `micro`: scaled from the reference batches when larger, else compiled."""
    if micro > REFERENCE_BATCHES[-1]:
        small, large = (dataclasses.replace(settings, batch_size=b) for b in REFERENCE_BATCHES)
        second = derived_reference(workload, preset, overrides, large, compile_missing) \
            if template_settings(workload, preset, large) != large else None
        scaled = scale_batch(direct_graph(workload, preset, overrides, small, compile_missing),
                             second or direct_graph(workload, preset, overrides, large, compile_missing), micro)
        if scaled is not None:
            return scaled
    return direct_graph(workload, preset, overrides, settings, compile_missing)


# Steps at the second reference batch derived from their template, by (cache directory, the step's key):
# None where the template does not give it.
_DERIVED: dict[tuple[str, str], OpGraph | None] = {}


def derived_reference(workload: str, preset: str, overrides: Mapping[str, Any], large: Settings,
                      compile_missing: bool = True) -> OpGraph | None:
    """The step at the second reference batch `large` derived from the step at the first by its template's
    batch rules (hardware/model/batch_template.py), or None where they do not give it."""
    memo_key = (str(cache_dir(CACHE_KIND)), train_step_compile(workload, preset, overrides, large).key)
    if memo_key not in _DERIVED:
        template = template_settings(workload, preset, large)
        first, *pair = [direct_graph(workload, preset, overrides, dataclasses.replace(s, batch_size=b), compile_missing)
                        for s, b in ((large, REFERENCE_BATCHES[0]), (template, REFERENCE_BATCHES[0]),
                                     (template, REFERENCE_BATCHES[1]))]
        _DERIVED[memo_key] = derive_batch(first, *pair)
    return _DERIVED[memo_key]


# The knobs a template step takes from the workload's recipe: those that add, repeat or retype kernels
# without changing which tensor dimensions grow with the batch (gradient accumulation repeats the
# micro-batch's kernels and slices them from an input grad_accum times as long: batch_template.tensor_map).
TEMPLATE_KNOBS = ("amp_level", "loss_scale", "recompute", "grad_accum")


def template_settings(workload: str, preset: str, settings: Settings) -> Settings:
    """The setting whose step at both reference batches gives `settings`' its batch rules: the published
    recipe's AMP level, loss scaler, recompute and gradient accumulation for a workload at its recipe's size (a matrix of tips
    around the recipe compiles that step anyway), `settings` itself otherwise."""
    recipe = recipe_for(workload, preset)
    if recipe is None:
        return settings
    defaults = Settings()
    try:
        return settings.replace(**{k: recipe.settings.get(k, getattr(defaults, k)) for k in TEMPLATE_KNOBS})
    except ConfigError:                 # the cell's other knobs do not go with the recipe's: its own pair
        return settings


def graph_knobs(settings: Settings) -> dict[str, Any]:
    return {k: getattr(settings, k) for k in GRAPH_KNOBS}


def direct_graph(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings,
                 compile_missing: bool = True) -> OpGraph:
    """The OpGraph compiled at the cell's own batch (cached; cold: one compile in a child process)."""
    job = train_step_compile(workload, preset, overrides, settings)
    memo_key = (str(cache_dir(CACHE_KIND)), job.key)
    if memo_key in _LOADED:
        return _LOADED[memo_key]
    if compile_missing:
        check_preset(workload, preset, overrides)
        graph = compiled_graph(job)
    else:
        found = cache_get(CACHE_KIND, job.key, validate=OpGraph.from_dict)
        if found is None:
            raise GraphNotCached(f"no cached graph of {workload} ({preset}) at batch {settings.batch_size}")
        graph = OpGraph.from_dict(found)
    _LOADED[memo_key] = graph
    return graph


def train_step_compile(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings) -> "GraphCompile":
    request = {"kind": "train_step", "workload": workload, "preset": preset, "overrides": dict(overrides),
               "settings": settings.to_dict()}
    return GraphCompile(graph_key(workload, preset, overrides, settings), request, settings)


@dataclass(frozen=True)
class GraphCompile:
    """One graph's cache key, the extraction child's request that compiles it, and the settings its meta is
    read with (`meta`: what the entry's meta adds, e.g. an LLM part's name)."""
    key: str
    request: dict[str, Any]
    settings: Settings
    meta: Mapping[str, Any] = field(default_factory=dict)

    def entry(self, result: dict[str, Any]) -> dict[str, Any]:
        """The cache entry (an OpGraph's dict) of the child's answer."""
        r = self.request
        return {"workload": r["workload"], "preset": r["preset"], "batch_size": result["batch_size"],
                "grad_accum": result["grad_accum"], "ops": result["ops"], "param_count": result["param_count"],
                "param_bytes": result["param_bytes"], "activation_bytes": result["activation_bytes"],
                "key": self.key, "meta": {**graph_meta(result, self.settings), **self.meta}}


def compiled_graph(job: GraphCompile) -> OpGraph:
    """The job's OpGraph, cached by content; cold: one compile in a child process (a junk entry is recompiled)."""
    data, _ = cached(CACHE_KIND, job.key, lambda: job.entry(run_extract(job.request)), validate=OpGraph.from_dict)
    return OpGraph.from_dict(data)


def compile_missing_graphs(jobs: Iterable[GraphCompile], report: Callable[[int, int], None] | None = None,
                           follow_up: Callable[[], list[GraphCompile]] | None = None) -> None:
    """Compile the jobs not yet cached in COMPILE_CHILDREN extraction children at a time, a chunk of
    jobs per child one after another (MindSpore imported once per child, ~3 s, not once per graph), and
    cache them. Chunks are taken from one queue as children finish, largest first, so a matrix's plan of
    many graphs keeps both children busy to its end, and a chunk's graphs are cached as soon as its child
    answers. A chunk's locks are taken in key order, so runs and cells compiling overlapping sets wait
    for each other and never deadlock. A job that failed is left uncached: `compiled_graph` compiles it
    alone and reports its error. `report(done, total)` is called as each chunk ends (a run's progress lines).
    `follow_up()`, asked as chunks end, names compiles that turn out to be needed once others are cached (the
    steps a template does not give): they join the queue, so both children stay busy with them too."""
    missing = missing_graphs(jobs)
    if len(missing) < 2 and follow_up is not None:
        missing = missing_graphs([*missing, *follow_up()])
    if len(missing) < 2:
        return
    queue = ChunkQueue(missing, COMPILE_CHILDREN, report, follow_up)
    compile_concurrently([queue.drain] * min(COMPILE_CHILDREN, len(missing)))


def missing_graphs(jobs: Iterable[GraphCompile]) -> list[GraphCompile]:
    """The distinct jobs not yet cached, the dearer compiles first (an LLM block, then whole training steps,
    then the rest), then by key."""
    order = {"block": 0, None: 1}
    return sorted({job.key: job for job in jobs if not cache_has(CACHE_KIND, job.key)}.values(),
                  key=lambda job: (order.get(job.request.get("part"), 2), job.key))


class ChunkQueue:
    """Guided self-scheduling (Polychronopoulos & Kuck, 1987): each chunk is a share of what is left,
    ceil(left / 2·children), but never fewer than MIN_CHUNK jobs (nor more than a child's even share),
    so that few children are started and the last ones are short. With `follow_up`, jobs found as chunks
    end join the queue, and a child that finds it empty waits while another may still add some."""

    def __init__(self, jobs: list[GraphCompile], children: int, report: Callable[[int, int], None] | None = None,
                 follow_up: Callable[[], list[GraphCompile]] | None = None) -> None:
        self.jobs, self.children, self.lock = list(jobs), children, threading.Condition()
        self.total, self.done, self.report, self.follow_up = len(self.jobs), 0, report, follow_up
        self.running, self.queued = 0, {job.key for job in self.jobs}

    def refill(self) -> None:
        """Add the follow-up jobs not queued yet (called holding the lock)."""
        for job in missing_graphs(self.follow_up() if self.follow_up else []):
            if job.key not in self.queued:
                self.queued.add(job.key)
                self.jobs.append(job)
                self.total += 1

    def take(self) -> list[GraphCompile]:
        with self.lock:
            while not self.jobs:
                self.refill()
                if self.jobs or not self.running:
                    break
                self.lock.wait()
            left = len(self.jobs)
            size = max(-(-left // (2 * self.children)), min(MIN_CHUNK, -(-left // self.children)))
            chunk, self.jobs = self.jobs[:size], self.jobs[size:]
            self.running += bool(chunk)
            return chunk

    def drain(self) -> None:
        while chunk := self.take():
            try:
                compile_chunk(chunk)
            finally:
                with self.lock:
                    self.running -= 1
                    self.done += len(chunk)
                    if self.report:
                        self.report(self.done, self.total)
                    self.refill()
                    self.lock.notify_all()


def compile_chunk(chunk: list[GraphCompile]) -> None:
    with contextlib.ExitStack() as locks:
        for job in sorted(chunk, key=lambda job: job.key):
            locks.enter_context(cache_lock(CACHE_KIND, job.key))
        todo = [job for job in chunk if not cache_has(CACHE_KIND, job.key)]   # another cell may have meanwhile
        if not todo:
            return
        for job, result in zip(todo, run_extract_batch([job.request for job in todo])):
            if result is not None:
                cache_put(CACHE_KIND, job.key, job.entry(result))


def graph_meta(result: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Counts and facts the predictor may need beyond the op list (all derived from the IR)."""
    ops = result["ops"]
    by_type: dict[str, int] = {}
    by_phase: dict[str, int] = {}
    flops_by_phase: dict[str, int] = {}
    for op in ops:
        by_type[op["type"]] = by_type.get(op["type"], 0) + 1
        by_phase[op["phase"]] = by_phase.get(op["phase"], 0) + 1
        flops_by_phase[op["phase"]] = flops_by_phase.get(op["phase"], 0) + op["flops"]
    return {
        **result["meta"],
        "mindspore": result["mindspore"],
        "ops_cover": "one optimizer update: all grad_accum micro-batches unrolled",
        "op_types": dict(sorted(by_type.items())),
        "ops_by_phase": dict(sorted(by_phase.items())),
        "flops_by_phase": dict(sorted(flops_by_phase.items())),
        "state_bytes": result["state_bytes"],
        "recomputed_blocks": result["recomputed_blocks"],
        "graph_knobs": graph_knobs(settings),
    }


def forward_flops(network: Any, inputs: Sequence[Any]) -> int:
    """FLOPs of one forward pass of `network` on `inputs`: 2 x multiply-accumulates of the matrix ops
    only (Conv2D, MatMul, BatchMatMul, Dense), the convention of published figures (ResNet-50 at
    224²: 4.1 GMAC = 8.2 GFLOPs). Elementwise, norm and pooling work is not counted.

    Exports the network to MindIR here (in eval mode; its training flag is restored after), then
    compiles it in a child process and counts the ops of its final kernel graph, so functional
    `ops.matmul` calls inside `construct` are seen too. `inputs` are MindSpore Tensors or numpy
    arrays of the shapes to count for. The export embeds the weights: expect a file of the model's
    size in the temporary directory for the duration of the call.
    """
    import numpy as np
    import mindspore as ms

    tensors = [x if isinstance(x, ms.Tensor) else ms.Tensor(np.asarray(x)) for x in inputs]
    specs = [{"dtype": str(t.asnumpy().dtype), "shape": list(t.shape)} for t in tensors]
    with tempfile.TemporaryDirectory(prefix="msbench-flops-") as tmp:
        was_training = network.training
        network.set_train(False)
        try:
            ms.export(network, *tensors, file_name=str(Path(tmp) / "net"), file_format="MINDIR")
        finally:
            network.set_train(was_training)
        # Over 1 GiB of weights, MindSpore writes net_graph.mindir plus a net_variables/ folder instead.
        exported = next(p for p in (Path(tmp) / "net.mindir", Path(tmp) / "net_graph.mindir") if p.exists())
        result = run_extract({"kind": "mindir", "path": str(exported), "inputs": specs})
    return sum(op["flops"] for op in result["ops"] if op["unit"] == "cube")


def workload_forward_size(workload: str, preset: str) -> tuple[int, int]:
    """The trainable parameters and forward FLOPs per sample (as `forward_flops` counts them) of a workload's
    network, built and compiled in the extraction child without parameter data: no weights are drawn in this
    process, exported or written (the MindIR route wrote over 1 GB for bert-large)."""
    result = run_extract({"kind": "forward", "workload": workload, "preset": preset})
    return result["trainable_elements"], sum(op["flops"] for op in result["ops"] if op["unit"] == "cube")


def compile_concurrently(jobs: Iterable[Callable[[], Any]]) -> list[Any]:
    """Run independent cached compiles (each a `cached` lookup that may start a child) side by side, so that
    one cell's cold graphs use the host's cores; `COMPILE_SLOTS` bounds the children across all cells."""
    with ThreadPoolExecutor(max_workers=COMPILE_CHILDREN) as pool:
        return list(pool.map(lambda job: job(), jobs))


def run_extract(request: dict[str, Any], timeout: float = EXTRACT_TIMEOUT_S) -> dict[str, Any]:
    """Compile and parse in `python -m hardware.model.extract` (clean IR environment, scratch cwd)."""
    try:
        with COMPILE_SLOTS, shared_host():           # compile-only: may overlap other children, not a probe
            return run_child("hardware.model.extract", request, timeout)
    except ChildError as err:
        raise ExtractionError(f"graph extraction {err}") from err


def run_extract_batch(requests: list[dict[str, Any]], timeout: float = EXTRACT_TIMEOUT_S) -> list[dict[str, Any] | None]:
    """Several compiles in one extraction child (MindSpore imported once: ~3 s of each small compile), each
    answer or None where that request failed, or the child did (the caller compiles those alone)."""
    try:
        with COMPILE_SLOTS, shared_host():
            answer = run_child("hardware.model.extract", {"kind": "batch", "requests": requests},
                               timeout * len(requests))
    except ChildError:
        return [None] * len(requests)
    return [item.get("result") for item in answer["results"]]
