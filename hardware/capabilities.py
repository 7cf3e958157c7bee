"""What every knob value does on every target kind: applied (the MindSpore call the real target
makes), modelled (the device-model input it changes) or refused (why). Declared once, here.

`MindSporeTarget.supports`, `ModelTarget.supports`, the cache-key knob sets of the op graph and of
the accuracy run, the inference scenario's knobs, `msbench list knobs` (hardware/knob_table.py) and the
capability test all read this table, so a knob cannot be wired on one side and silently ignored on another. Pure data and small functions: no
MindSpore import (the runner's parent refuses a cell before any child starts).

Refusal texts cite shared/reference/mindspore-2.10-cpu.md where they state MindSpore behaviour.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from msbench.settings import DEFAULTS, Settings

REAL_KINDS = ("mindspore:cpu", "mindspore:ascend", "mindspore:gpu")
MODEL_KINDS = ("model:npu", "model:cpu")
KINDS = REAL_KINDS + MODEL_KINDS
CPU_OPTIMIZERS_MISSING = {"lars": "LARSUpdate", "lamb": "Lamb"}   # kernel-select failures measured on 2.10 CPU
MODEL_PREFETCH_DEPTHS = (0, DEFAULTS["prefetch"])


# What a knob's value may change (Effect.inputs): what the cache keys, the prediction path, the accuracy
# run and the inference scenario derive their knob sets from, instead of reading the prose or keeping lists.
OP_GRAPH = "op_graph"               # the compiled step the device model extracts (the graph cache key)
PIPELINE_MODES = "pipeline_modes"   # the pipeline's measured modes (hardware/calibration/pipeline_modes.json)
NUMBERS = "numbers"                 # the numbers a training run computes (the accuracy run's key)
FORWARD = "forward"                 # the exported forward network an inference cell calls (msbench.scenario)
LLM_PLAN = "llm_plan"               # the LLM composition's layout and kernels (hardware/model/llm): read by it only
LAYOUT = "parallel_layout"          # how the step is split over cards beyond data parallelism (of LLM_PLAN)
MODEL_INPUTS = (OP_GRAPH, PIPELINE_MODES, NUMBERS, FORWARD, LLM_PLAN, LAYOUT)


@dataclass(frozen=True)
class Effect:
    """What a supported value of a knob does on a target kind."""

    how: str        # "applied" (a MindSpore call) | "modelled" (a device-model input) | "refused" (every value)
    what: str       # the call, or the input
    inputs: frozenset[str] = frozenset()    # of MODEL_INPUTS: the typed part of `what` on a model kind
    llm_refused: str | None = None          # model kinds: why the LLM composition refuses a non-default value


@dataclass(frozen=True)
class Facts:
    """What a refusal may depend on beyond the settings. Unknown facts (None) never refuse."""

    cpus: int | None = None              # CPUs of the host a real run uses
    marked_blocks: int | None = None     # blocks the workload marks for recompute (known once built/extracted)
    accuracy: bool = False               # the model target also runs the real tiny-preset accuracy
    profile_sinks: bool = True           # the profile's launch model supports dataset sink
    host_is_device: bool = False         # the profile's data pipeline shares the device's cores (never overlaps)
    ragged_last_batch: bool | None = None    # the training split leaves a ragged last batch (drop_remainder acts)
    device_vision_ops: bool | None = None    # the pipeline has deterministic vision ops MindSpore can run on Ascend
    usable_gib: float | None = None          # the profile's usable device memory
    fragmentation: float | None = None       # the profile's pool fragmentation (what SOMAS can remove)
    llm_composition: bool = False        # the device model composes this cell's LLM parallel step (hardware/model/llm)
    flash_kernel: bool | None = None     # the profile has measured FlashAttentionScore tables (Atlas A2)


@dataclass(frozen=True)
class Refusal:
    """Values of `knob` that target kinds `kinds` cannot honour (`when`), and why (`reason`)."""

    knob: str
    kinds: tuple[str, ...]
    when: Callable[[Settings, Facts], bool]
    reason: Callable[[Settings, Facts], str]


@dataclass(frozen=True)
class Capability:
    """One knob value on one target kind: `status` applied|modelled|refused, `text` the call, input or reason."""

    status: str
    text: str


def _apply(what: str, *inputs: str) -> Effect:
    return Effect("applied", what, frozenset(inputs))


def _model(what: str, *inputs: str) -> Effect:
    return Effect("modelled", what, frozenset(inputs))


def _everywhere(real: str, model: str, *inputs: str) -> dict[str, Effect]:
    return {**{k: _apply(real) for k in REAL_KINDS}, **{k: _model(model, *inputs) for k in MODEL_KINDS}}


GRAPH = "the compiled op graph (extraction key)"
STEP = "workloads.train_step.build_train_step"
DATASET = "workloads.pipeline.make_dataset"
MODES = "hardware.model.pipeline_modes"

# knob -> target kind -> what a supported value does. Every knob of Settings appears, every kind too.
EFFECTS: dict[str, dict[str, Effect]] = {
    "mode": _everywhere("ms.set_context(mode=GRAPH_MODE|PYNATIVE_MODE)", "host_time.dispatch_us (per-op dispatch)",
                        FORWARD),
    "jit_level": _everywhere("cell.set_jit_config(ms.JitConfig(jit_level=...))",
                             "host_time.dispatch_us and fusion (O1 fuses on npu; O2 sinks the graph)", FORWARD),
    "graph_kernel": _everywhere("ms.set_context(enable_graph_kernel=True)", "fusion.apply_fusion + O1 dispatch cost",
                                 FORWARD),
    "amp_level": _everywhere(f"{STEP}: ms.amp.auto_mixed_precision(level)", GRAPH, OP_GRAPH, NUMBERS, FORWARD),
    "loss_scale": _everywhere(f"{STEP}: the step cell's loss scaler", GRAPH, OP_GRAPH, NUMBERS),
    "keep_batchnorm_fp32": _everywhere(f"{STEP}: auto_mixed_precision O2 vs O3 (norms fp32 or fp16)", GRAPH, OP_GRAPH,
                                       NUMBERS, FORWARD),
    "batch_size": _everywhere(f"{STEP} and {DATASET}: data.batch(batch_size)", GRAPH, OP_GRAPH, NUMBERS, FORWARD),
    "grad_accum": _everywhere(f"{STEP}: micro-batches per update", GRAPH + " + memory.estimate_memory", OP_GRAPH,
                              NUMBERS),
    "recompute": _everywhere(f"{STEP}: block.recompute() on the marked blocks", GRAPH, OP_GRAPH),
    "workers": _everywhere(f"{DATASET}: num_parallel_workers", "host_time.data_seconds (workers with a core)"),
    "prefetch": _everywhere(f"{DATASET}: ds.config.set_prefetch_size", "host_time: data overlaps the step (> 0) or not"),
    "data_format": _everywhere(f"{DATASET}: GeneratorDataset or MindDataset",
                               "host_cost (the measured per-sample cost of that source)"),
    "cache": {**{k: _apply(f"{DATASET}: ds.DatasetCache on a cache server") for k in REAL_KINDS},
              **{k: Effect("refused", "not modelled") for k in MODEL_KINDS}},
    "sink": _everywhere("ms.data_sink(step, dataset, sink_size)", "host_time round trip and batch transfer"),
    "sink_size": _everywhere("ms.data_sink(..., sink_size=...)", "host_time: round trip amortised over a sink round"),
    "devices": _everywhere(f"msrun --worker_num=N + DATA_PARALLEL ({STEP} reduces gradients)",
                           "comm.gradient_allreduce + global throughput"),
    "optimizer": _everywhere(f"{STEP}: make_optimizer", GRAPH + " + optimizer state memory", OP_GRAPH, NUMBERS),
    "lr_schedule": _everywhere(f"{STEP}: learning_rate (a LearningRateSchedule)", GRAPH, OP_GRAPH, NUMBERS),
    "grad_clip": _everywhere(f"{STEP}: nn.ClipByNorm per gradient | ops.clip_by_global_norm", GRAPH, OP_GRAPH, NUMBERS),
    "seed": {**{k: _apply("ms.set_seed + ds.config.set_seed") for k in REAL_KINDS},
             **{k: _apply("the accuracy run's ms.set_seed (only with accuracy=true)", NUMBERS, FORWARD)
                for k in MODEL_KINDS}},
    "lr_scaling": {**{k: _apply(f"{STEP}: learning rate x global-batch ratio, with warm-up (Goyal et al.)")
                      for k in REAL_KINDS},
                   **{k: _apply("the accuracy run's learning rate (only with accuracy=true)", NUMBERS)
                      for k in MODEL_KINDS}},
}

PLAN = "workloads.parallel_plan"
LLM_MODEL = "hardware.model.llm"
EFFECTS.update({
    "tensor_parallel": {**{k: _apply(f"{PLAN}: column- then row-parallel shard() on the attention and FFN matmuls")
                           for k in REAL_KINDS},
                        **{k: _model(f"{LLM_MODEL}: per-shard block shapes (heads, kv heads, ffn / tp) + "
                                     "tensor-parallel collectives per block", LLM_PLAN, LAYOUT) for k in MODEL_KINDS}},
    "pipeline_stages": {**{k: _apply(f"{PLAN}: set_auto_parallel_context(pipeline_stages) + cell.pipeline_stage "
                                     "per layer") for k in REAL_KINDS},
                        **{k: _model(f"{LLM_MODEL}: layers per stage, pipeline bubble and stage-to-stage sends",
                                     LLM_PLAN, LAYOUT) for k in MODEL_KINDS}},
    "micro_batches": {**{k: _apply(f"{PLAN}: nn.PipelineCell(network, micro_size)") for k in REAL_KINDS},
                      **{k: _model(f"{LLM_MODEL}: bubble (p-1)/(m+p-1) and in-flight activations", LLM_PLAN, LAYOUT)
                         for k in MODEL_KINDS}},
    "sequence_parallel": {**{k: _apply(f"{PLAN}: norm/residual activations sharded along the sequence "
                                       "(reduce-scatter + all-gather instead of all-reduce)") for k in REAL_KINDS},
                          **{k: _model(f"{LLM_MODEL}: activation memory / tp and reduce-scatter + all-gather",
                                       LLM_PLAN, LAYOUT) for k in MODEL_KINDS}},
    "optimizer_shard": {**{k: _apply(f"{PLAN}: set_auto_parallel_context(enable_parallel_optimizer=True)")
                           for k in REAL_KINDS},
                        **{k: _model(f"{LLM_MODEL}: optimizer states / dp and the gradient reduce-scatter + "
                                     "parameter all-gather", LLM_PLAN, LAYOUT) for k in MODEL_KINDS}},
    "flash_attention": {**{k: _apply("workloads.transformer attention: ops.flash_attention_score (FlashAttentionScore)")
                           for k in REAL_KINDS},
                        **{k: _model(f"{LLM_MODEL}: attention-score tensors dropped from activation memory; the "
                                     "block's attention core costed as one FlashAttentionScore + one "
                                     "FlashAttentionScoreGrad per layer (llm/flash.py, the profile's flash tables)",
                                     LLM_PLAN) for k in MODEL_KINDS}},
    "parallel_mode": {**{k: _apply(f"{PLAN}: set_auto_parallel_context(parallel_mode=SEMI_AUTO_PARALLEL | "
                                   "AUTO_PARALLEL, search_mode='sharding_propagation')") for k in REAL_KINDS},
                      **{k: _model(f"{LLM_MODEL}: the layout the composition costs (auto: the semi_auto plan, "
                                   "which sharding propagation extends)", LLM_PLAN, LAYOUT) for k in MODEL_KINDS}},
})
EFFECTS.update({
    "python_multiprocessing": _everywhere(f"{DATASET}: GeneratorDataset/map(python_multiprocessing=True)",
                                          f"{MODES}: the measured process/thread time ratio of the pipeline",
                                          PIPELINE_MODES),
    "shared_mem": _everywhere("ds.config.set_enable_shared_mem(enable)",
                              f"{MODES}: the measured shared-memory on/off time ratio of the pipeline", PIPELINE_MODES),
    "augment_device": {**{k: _apply(f"{DATASET}: Decode/Resize/Normalize .device('Ascend') (DVPP)")
                          for k in REAL_KINDS},
                       **{k: _model(f"{MODES}: the deterministic ops' measured host share moved to the vision units",
                                 PIPELINE_MODES)
                          for k in MODEL_KINDS}},
    "drop_remainder": _everywhere(f"{DATASET}: data.batch(batch_size, drop_remainder=...)",
                                  f"{MODES}: one more graph compile per epoch for the ragged batch", PIPELINE_MODES),
    "memory_optimize_level": _everywhere("ms.runtime.set_memory(optimize_level=...)",
                                         "memory.estimate_memory: the pool's fragmentation (O0) or SOMAS' plan (O1)"),
    "max_device_memory": _everywhere("ms.runtime.set_memory(max_size='<GiB>GB')",
                                     "memory.estimate_memory: the OOM threshold (the cap, not the chip's usable memory)"),
})

# What the LLM composition (hardware/model/llm) costs is the device side of a graph-mode, sunk step: compute,
# collectives, the pipeline bubble, the optimizer. Host-side knobs it does not model are refused there, not ignored.
_LLM_GRAPH_SINK = "the device model composes a decoder-only LLM's step as MindSpore trains one on Ascend, in graph mode with dataset sink (no per-kernel host dispatch, no per-step round trip); set mode=graph and sink=true"
_LLM_NO_FUSION = "the device model composes a decoder-only LLM's step from its blocks as extracted; graph-kernel fusion of its blocks is not modelled"
_LLM_NO_PIPELINE = "the LLM composition does not model the host data pipeline (a token batch is a few KB per sample); leave it at its default"
_LLM_NO_CLIP = ("the LLM composition costs the optimizer's update kernels but not a clipping pass over the "
                "gradients yet; leave it at its default")
_LLM_OWN_MEMORY = "the LLM composition's memory model (Korthikanti et al.) has no SOMAS reuse or pool cap yet; leave it at its default"
_LLM_UNMODELLED = {"graph_kernel": _LLM_NO_FUSION, "sink_size": _LLM_NO_PIPELINE, "workers": _LLM_NO_PIPELINE,
                   "prefetch": _LLM_NO_PIPELINE, "data_format": _LLM_NO_PIPELINE,
                   "python_multiprocessing": _LLM_NO_PIPELINE, "shared_mem": _LLM_NO_PIPELINE,
                   "augment_device": _LLM_NO_PIPELINE, "drop_remainder": _LLM_NO_PIPELINE, "grad_clip": _LLM_NO_CLIP,
                   "memory_optimize_level": _LLM_OWN_MEMORY, "max_device_memory": _LLM_OWN_MEMORY}
for _knob, _why in _LLM_UNMODELLED.items():
    EFFECTS[_knob] = {kind: dataclasses.replace(e, llm_refused=_why) if kind in MODEL_KINDS else e
                      for kind, e in EFFECTS[_knob].items()}


def knobs_changing(model_input: str) -> tuple[str, ...]:
    """Knobs whose supported values change `model_input` (of MODEL_INPUTS) on every model kind, in Settings order."""
    return tuple(k for k in DEFAULTS if all(model_input in EFFECTS[k][kind].inputs for kind in MODEL_KINDS))


def _preset_batch(s: Any) -> bool:
    """The global batch is the preset's own: the learning-rate rule has nothing to scale."""
    return s.batch_size is None and s.devices == 1 and s.grad_accum == 1


_GE = "jit_level=O2 sinks the whole graph through GE, which exists on Ascend only"
_CPU_O1 = ("jit_level=O1 on CPU: accepted but does no fusion (losses bit-identical to O0); "
           "use graph_kernel=true for CPU fusion")

REFUSALS: tuple[Refusal, ...] = (
    Refusal("workers", REAL_KINDS, lambda s, f: f.cpus is not None and s.workers > f.cpus,
            lambda s, f: f"workers={s.workers} exceeds the {f.cpus} CPUs of this host "
                         "(mindspore.dataset refuses num_parallel_workers > cpu count)"),
    Refusal("prefetch", REAL_KINDS, lambda s, f: s.prefetch == 0,
            lambda s, f: "prefetch=0: mindspore.dataset always prefetches at least one batch "
                         "(ds.config.set_prefetch_size needs >= 1), so no-prefetch cannot be measured"),
    Refusal("sink", ("mindspore:cpu",), lambda s, f: s.sink,
            lambda s, f: "sink=true: dataset sink is Ascend/GPU only; MindSpore 2.10 silently falls back to "
                         "non-sink on CPU"),
    Refusal("jit_level", ("mindspore:cpu", "model:cpu"), lambda s, f: s.jit_level == "O1", lambda s, f: _CPU_O1),
    Refusal("jit_level", ("mindspore:cpu", "mindspore:gpu", "model:cpu"), lambda s, f: s.jit_level == "O2",
            lambda s, f: _GE),
    Refusal("optimizer", ("mindspore:cpu",), lambda s, f: s.optimizer in CPU_OPTIMIZERS_MISSING,
            lambda s, f: f"optimizer={s.optimizer}: MindSpore 2.10 has no CPU kernel for "
                         f"{CPU_OPTIMIZERS_MISSING[s.optimizer]} (kernel select fails)"),
    Refusal("devices", ("mindspore:cpu",), lambda s, f: f.cpus is not None and s.devices > f.cpus,
            lambda s, f: f"devices={s.devices} exceeds the {f.cpus} CPUs of this host: data-parallel ranks "
                         "would share cores and measure contention, not scaling"),
    Refusal("recompute", KINDS, lambda s, f: s.recompute != "none" and f.marked_blocks == 0,
            lambda s, f: f"recompute={s.recompute}: the workload marks no blocks to recompute, "
                         "so the knob would change nothing"),
    Refusal("cache", MODEL_KINDS, lambda s, f: s.cache,
            lambda s, f: "cache=true: the device model has no dataset-cache input (the cache server's effect on "
                         "the host pipeline is not modelled); measure it on a mindspore target"),
    Refusal("prefetch", MODEL_KINDS, lambda s, f: s.prefetch not in MODEL_PREFETCH_DEPTHS,
            lambda s, f: f"prefetch={s.prefetch}: the device model reads only whether batches are prefetched "
                         f"(0 or the default {DEFAULTS['prefetch']}); other depths change queue smoothing, "
                         "which it does not model"),
    Refusal("prefetch", MODEL_KINDS, lambda s, f: s.prefetch == 0 and f.host_is_device,
            lambda s, f: "prefetch=0: on this profile the data pipeline shares the device's cores and never "
                         "overlaps the step, so the device model reads no difference without prefetch"),
    Refusal("sink", MODEL_KINDS, lambda s, f: s.sink and not f.profile_sinks,
            lambda s, f: "sink=true: dataset sink is not available on this profile "
                         "(MindSpore sinks only on Ascend/GPU)"),
    Refusal("augment_device", ("mindspore:cpu", "mindspore:gpu", "model:cpu"), lambda s, f: s.augment_device == "ascend",
            lambda s, f: "augment_device=ascend: vision ops run with .device('Ascend') on Ascend's DVPP only; this "
                         "target has no such unit"),
    Refusal("augment_device", KINDS, lambda s, f: s.augment_device == "ascend" and f.device_vision_ops is False,
            lambda s, f: "augment_device=ascend: this workload's pipeline has no deterministic vision op "
                         "(Decode/Resize/Normalize) to move to the device"),
    Refusal("drop_remainder", KINDS, lambda s, f: not s.drop_remainder and f.ragged_last_batch is False,
            lambda s, f: "drop_remainder=false: the training split divides into whole batches, so there is no "
                         "ragged last batch to keep (set batch_size so that it does not)"),
    Refusal("max_device_memory", ("mindspore:cpu",), lambda s, f: s.max_device_memory is not None,
            lambda s, f: "max_device_memory: the CPU backend does not enforce a pool cap (max_size=0.05GB still "
                         "used 700 MB; max_device_memory is ignored with a warning)"),
    Refusal("drop_remainder", MODEL_KINDS, lambda s, f: not s.drop_remainder and s.mode != "graph",
            lambda s, f: "drop_remainder=false in pynative mode: the device model charges the ragged batch's "
                         "recompile in graph mode only (PyNative's per-op shape cache is not modelled)"),
    Refusal("memory_optimize_level", MODEL_KINDS,
            lambda s, f: s.memory_optimize_level == "O1" and (f.host_is_device or f.fragmentation == 0),
            lambda s, f: ("memory_optimize_level=O1 on the CPU backend: measured, O1 used more memory, not less "
                          "(1978 vs 1824 MB RSS), so SOMAS's packing gain (modelled for Ascend) does not apply")
            if f.host_is_device else
            "memory_optimize_level=O1: this profile's pool has no fragmentation for SOMAS to remove"),
    Refusal("max_device_memory", MODEL_KINDS,
            lambda s, f: s.max_device_memory is not None and f.usable_gib is not None and s.max_device_memory >= f.usable_gib,
            lambda s, f: f"max_device_memory={s.max_device_memory:g}: at or above this profile's usable "
                         f"{f.usable_gib:g} GiB, so the pool is the chip's usable memory either way"),
    Refusal("lr_scaling", KINDS, lambda s, f: s.lr_scaling != DEFAULTS["lr_scaling"] and _preset_batch(s),
            lambda s, f: f"lr_scaling={s.lr_scaling}: the global batch is the preset's (no batch_size, devices or "
                         "grad_accum set), so there is no scaling to change"),
    Refusal("lr_scaling", MODEL_KINDS, lambda s, f: s.lr_scaling != DEFAULTS["lr_scaling"] and not f.accuracy,
            lambda s, f: f"lr_scaling={s.lr_scaling}: predictions do not depend on the learning rate; it changes "
                         "only the accuracy run (accuracy = true in the matrix)"),
    Refusal("seed", MODEL_KINDS, lambda s, f: s.seed != DEFAULTS["seed"] and not f.accuracy,
            lambda s, f: f"seed={s.seed}: predictions do not depend on the seed; it changes only the accuracy "
                         "run (accuracy = true in the matrix)"),
)


_CPU_DATA_ONLY = ("the MindSpore CPU backend runs data parallel only (mindspore.set_auto_parallel_context: "
                  "'CPU only supports data parallel')")


def _llm_default(s: Settings, knob: str) -> bool:
    return getattr(s, knob) == DEFAULTS[knob]


# Knobs only the LLM composition reads: a model cell it does not compose refuses them.
LLM_PLAN_KNOBS = knobs_changing(LLM_PLAN)


def llm_refused_knobs() -> tuple[tuple[str, str], ...]:
    """(knob, why) for each knob whose non-default value the LLM composition refuses, in Settings order."""
    return tuple((k, why) for k in DEFAULTS if (why := EFFECTS[k][MODEL_KINDS[0]].llm_refused) is not None)


REFUSALS += tuple(
    Refusal(knob, ("mindspore:cpu",), lambda s, f, knob=knob: not _llm_default(s, knob),
            lambda s, f, knob=knob: f"{knob}={value_text(getattr(s, knob))}: {_CPU_DATA_ONLY}")
    for knob in knobs_changing(LAYOUT)
) + (
    Refusal("flash_attention", ("mindspore:cpu", "mindspore:gpu"), lambda s, f: s.flash_attention,
            lambda s, f: "flash_attention=true: FlashAttentionScore has kernels for Ascend (Atlas A2/A3 training "
                         "series) only, none for the CPU or GPU backend"),
    Refusal("flash_attention", MODEL_KINDS, lambda s, f: s.flash_attention and f.flash_kernel is False,
            lambda s, f: "flash_attention=true: this profile has no FlashAttentionScore timing to cost the fused "
                         "kernel with (measured on Atlas A2 only: hardware/calibration/data/public_flash_attention.csv)"),
    Refusal("tensor_parallel", MODEL_KINDS, lambda s, f: not f.llm_composition
            and not all(_llm_default(s, k) for k in LLM_PLAN_KNOBS),
            lambda s, f: f"LLM parallelism ({', '.join(LLM_PLAN_KNOBS)}): the device model composes it in "
                         "hardware/model/llm, which does not cost this cell"),
)


REFUSALS += (
    Refusal("mode", MODEL_KINDS, lambda s, f: f.llm_composition and s.mode != "graph", lambda s, f: f"mode={s.mode}: {_LLM_GRAPH_SINK}"),
    Refusal("sink", MODEL_KINDS, lambda s, f: f.llm_composition and not s.sink, lambda s, f: f"sink=false: {_LLM_GRAPH_SINK}"),
) + tuple(
    Refusal(knob, MODEL_KINDS, lambda s, f, knob=knob: f.llm_composition and not _llm_default(s, knob),
            lambda s, f, knob=knob, why=why: f"{knob}={value_text(getattr(s, knob))}: {why}")
    for knob, why in llm_refused_knobs()
)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"target kind={kind!r} is not known; allowed: {', '.join(KINDS)}")
    return kind


def refusal(settings: Settings, kind: str, facts: Facts = Facts()) -> str | None:
    """Why a target of `kind` cannot honour these settings (the first refusal that applies), else None."""
    found = refused_knob(settings, kind, facts)
    return found[1] if found else None


def refused_knob(settings: Settings, kind: str, facts: Facts = Facts()) -> tuple[str, str] | None:
    """(knob, reason) of the first refusal that applies, else None: a config importer leaves that knob at its
    default and says why, where `refusal` only explains."""
    check_kind(kind)
    for r in REFUSALS:
        if kind in r.kinds and r.when(settings, facts):
            return r.knob, r.reason(settings, facts)
    return None


def graph_knobs() -> tuple[str, ...]:
    """Knobs that change the compiled training step the device model reads (its cache key): those whose
    model effect is the op graph, in Settings order."""
    return knobs_changing(OP_GRAPH)


# Knobs that change the numbers a training run computes (the accuracy run's key). Recompute is not one:
# it recomputes the same activations (tests/workloads/test_train_step.py checks the losses are equal).
NUMERICS = knobs_changing(NUMBERS)
# Knobs that still act on an exported forward network (the inference scenario allows only these): the execution
# mode and compile level it is loaded under, the precision it was exported at, the batch it is called with, the
# seed of its initial weights.
INFERENCE_KNOBS = knobs_changing(FORWARD)


def value_text(value: Any) -> str:
    """A knob value as refusals and the knob table print it (unset, true/false, the value)."""
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
