"""Settings: one typed field per tuning knob, with its MindSpore default, allowed values and meaning.

Validation lives here so that every entry point (matrix files, `--set NAME=VALUE`, asv params)
refuses the same impossible combinations with the same message.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

from msbench.errors import ConfigError


def knob(default: Any, allowed: tuple | range | None, help: str) -> Any:
    """A dataclass field carrying the knob's allowed values and one-line meaning."""
    return field(default=default, metadata={"allowed": allowed, "help": help})


MAX_INT = 1 << 20
MAX_DEVICES = 4096   # set_auto_parallel_context(device_num) accepts 1..4096


@dataclass(frozen=True)
class FloatRange:
    """Allowed values of a float knob: above `low` (exclusive) and at most `high`."""

    low: float
    high: float
    unit: str

    def __contains__(self, value: object) -> bool:
        return isinstance(value, float) and self.low < value <= self.high


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every knob of a training run. Defaults are MindSpore 2.10's own (or the preset's, for batch size)."""

    mode: str = knob("pynative", ("graph", "pynative"), "execution mode: whole-graph compile or eager (MindSpore's default)")
    jit_level: str = knob("O0", ("O0", "O1", "O2"), "graph compile level: O0 kernel-by-kernel, O1 +fusion, O2 whole-graph sink (GE)")
    graph_kernel: bool = knob(False, (False, True), "graph-kernel fusion of elementwise chains (AKG)")
    amp_level: str = knob("O0", ("O0", "O1", "O2", "O3"), "automatic mixed precision: O0 fp32, O1 allow-list fp16, O2 fp16 but BN/loss, O3 all fp16")
    loss_scale: str = knob("none", ("none", "static", "dynamic"), "loss scaling for fp16 gradients")
    keep_batchnorm_fp32: bool | None = knob(None, (None, False, True), "keep BatchNorm in fp32 under AMP; unset = MindSpore's per-level default (fp32 at O2, fp16 at O3)")
    batch_size: int | None = knob(None, range(1, MAX_INT), "samples per device per step; unset = the preset's")
    grad_accum: int = knob(1, range(1, 1025), "micro-batches accumulated per optimizer update")
    recompute: str = knob("none", ("none", "selective", "full"), "recompute activations in backward: none, the blocks the workload marks, every block")
    workers: int = knob(1, range(1, 129), "data-pipeline parallel workers (GeneratorDataset default 1)")
    prefetch: int = knob(16, range(0, 1025), "data-pipeline prefetch depth in batches (ds.config default 16); 0 = none")
    data_format: str = knob("generator", ("generator", "mindrecord"), "dataset source: Python generator or MindRecord files")
    cache: bool = knob(False, (False, True), "MindSpore dataset cache server in front of the source")
    sink: bool = knob(False, (False, True), "dataset sink mode: the device pulls batches itself (Ascend/GPU)")
    sink_size: int = knob(-1, range(-1, MAX_INT), "steps per sink round; -1 = one epoch")
    devices: int = knob(1, tuple(2**i for i in range(13)), "total devices (cards, a power of two); data-parallel "
                        "size = devices / (tensor_parallel x pipeline_stages)")
    optimizer: str = knob("momentum", ("momentum", "adam", "adamw", "lars", "lamb"), "optimizer")
    lr_schedule: str = knob("constant", ("constant", "cosine", "step", "poly"), "learning-rate schedule")
    grad_clip: str = knob("none", ("none", "norm", "global_norm"), "gradient clipping to L2 norm 1.0 before the update: "
                          "none, each gradient alone (nn.ClipByNorm, the model-zoo BERT and Transformer) or all together "
                          "(ops.clip_by_global_norm, MindFormers)")
    seed: int = knob(1, range(0, 2**31), "global random seed")
    lr_scaling: str = knob("linear", ("linear", "none"), "learning rate vs the global batch: linear (Goyal et al. 2017, warm-up when it grows) or none (the preset's rate)")
    tensor_parallel: int = knob(1, range(1, MAX_DEVICES + 1), "model-parallel size: the attention and FFN matmuls split over this many cards (shard strategies)")
    pipeline_stages: int = knob(1, range(1, MAX_DEVICES + 1), "pipeline-parallel stages: the layers split into this many consecutive groups (1F1B)")
    micro_batches: int = knob(1, range(1, MAX_INT), "micro-batches per step that fill the pipeline (PipelineCell); >= pipeline_stages")
    sequence_parallel: bool = knob(False, (False, True), "split LayerNorm/dropout activations along the sequence over the tensor-parallel group")
    optimizer_shard: bool = knob(False, (False, True), "parallel optimizer (enable_parallel_optimizer): optimizer states and gradients sharded over the data-parallel group")
    flash_attention: bool = knob(False, (False, True), "fused FlashAttentionScore kernel instead of softmax(QK^T)V (no T x T score tensors kept)")
    parallel_mode: str = knob("data", ("data", "semi_auto", "auto"), "MindSpore parallel mode: DATA_PARALLEL, SEMI_AUTO_PARALLEL (the shard plan), AUTO_PARALLEL (sharding propagation)")
    python_multiprocessing: bool = knob(False, (False, True), "the pipeline's Python stages (generator source, Python maps) in worker processes instead of threads")
    shared_mem: bool = knob(True, (False, True), "ds.config.set_enable_shared_mem: process workers hand rows over in shared memory (2.10 default on, Linux); only with python_multiprocessing")
    augment_device: str = knob("cpu", ("cpu", "ascend"), "where the deterministic vision ops (Decode/Resize/Normalize) run: host CPU or .device('Ascend') (DVPP); random ops stay on the host")
    drop_remainder: bool = knob(True, (False, True), "drop the ragged last batch of an epoch (default true: msbench's pipelines always did, so cell ids stay; Dataset.batch's own default is false); false keeps it: a new shape, one more graph compile per epoch")
    memory_optimize_level: str = knob("O0", ("O0", "O1"), "ms.runtime.set_memory(optimize_level): O0 the dynamic pool, O1 static memory reuse planned over the graph's liveness (SOMAS)")
    max_device_memory: float | None = knob(None, FloatRange(0.0, 1024.0, "GiB"), "device memory pool cap in GiB (ms.runtime.set_memory(max_size)); unset = the chip's usable memory")

    def __post_init__(self) -> None:
        for f in fields(self):
            check_value(f.name, getattr(self, f.name))
        for rule in RULES:
            if rule.violated(self):
                name = rule.knobs[0]
                raise ConfigError(name, getattr(self, name), rule.allowed, rule=rule.text)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def non_default(self) -> dict[str, Any]:
        """Only the knobs that differ from their defaults: the canonical form used in cell ids."""
        return {k: v for k, v in self.to_dict().items() if v != DEFAULTS[k]}

    @property
    def batchnorm_in_fp32(self) -> bool:
        """The effective BatchNorm precision: the knob, else `ms.amp.build_train_network`'s level default."""
        return self.amp_level == "O2" if self.keep_batchnorm_fp32 is None else self.keep_batchnorm_fp32

    @property
    def model_parallel(self) -> int:
        """Cards that hold one replica of the model (tensor x pipeline)."""
        return self.tensor_parallel * self.pipeline_stages

    @property
    def data_parallel(self) -> int:
        """Replicas of the model: `devices` counts every card, so dp = devices / (tp x pp)."""
        return self.devices // self.model_parallel

    def replace(self, **changes: Any) -> "Settings":
        return make_settings({**self.to_dict(), **changes})


@dataclass(frozen=True)
class Rule:
    """An impossible combination of knobs. `violated` is true when the settings break it."""

    knobs: tuple[str, ...]
    text: str
    allowed: str
    violated: Callable[[Settings], bool]


RULES: tuple[Rule, ...] = (
    Rule(("sink", "mode"), "dataset sink needs mode=graph", "sink=false unless mode=graph",
         lambda s: s.sink and s.mode != "graph"),
    Rule(("sink_size", "sink"), "sink_size applies only with sink=true", "sink_size=-1 unless sink=true",
         lambda s: s.sink_size != -1 and not s.sink),
    Rule(("sink_size",), "sink_size must be -1 or a positive step count", "-1 or >= 1",
         lambda s: s.sink_size == 0),
    Rule(("jit_level", "mode"), "jit_level O1/O2 needs mode=graph", "jit_level=O0 unless mode=graph",
         lambda s: s.jit_level != "O0" and s.mode != "graph"),
    Rule(("graph_kernel", "mode"), "graph_kernel fusion needs mode=graph", "graph_kernel=false unless mode=graph",
         lambda s: s.graph_kernel and s.mode != "graph"),
    Rule(("graph_kernel", "jit_level"), "graph_kernel works with jit_level O0/O1; O2 hands the whole graph to GE",
         "graph_kernel=false when jit_level=O2", lambda s: s.graph_kernel and s.jit_level == "O2"),
    Rule(("loss_scale", "amp_level"), "loss scaling needs fp16 compute (amp_level other than O0)",
         "loss_scale=none when amp_level=O0", lambda s: s.loss_scale != "none" and s.amp_level == "O0"),
    Rule(("keep_batchnorm_fp32", "amp_level"), "keep_batchnorm_fp32 acts only under amp_level O2/O3 "
         "(O0 computes in fp32, O1 never casts the norm layers)", "keep_batchnorm_fp32=unset unless amp_level is O2|O3",
         lambda s: s.keep_batchnorm_fp32 is not None and s.amp_level in ("O0", "O1")),
    Rule(("keep_batchnorm_fp32", "amp_level"), "keep_batchnorm_fp32 may only change its AMP level's default "
         "(O2 keeps norms fp32, O3 does not): the same value again would be a cell that changes nothing",
         "keep_batchnorm_fp32=false at O2, true at O3, else unset",
         lambda s: (s.amp_level, s.keep_batchnorm_fp32) in (("O2", True), ("O3", False))),
    Rule(("shared_mem", "python_multiprocessing"), "shared_mem changes how process workers hand rows over; "
         "thread workers share memory anyway", "shared_mem=true (the default) unless python_multiprocessing=true",
         lambda s: not s.shared_mem and not s.python_multiprocessing),
    Rule(("drop_remainder", "grad_accum"), "a ragged last batch cannot be split into grad_accum equal micro-batches",
         "drop_remainder=true when grad_accum > 1", lambda s: not s.drop_remainder and s.grad_accum > 1),
    Rule(("cache", "data_format"), "the dataset cache needs a mappable source (data_format=mindrecord); "
         "MindSpore refuses a GeneratorDataset under cache", "cache=false unless data_format=mindrecord",
         lambda s: s.cache and s.data_format != "mindrecord"),
    Rule(("tensor_parallel", "pipeline_stages", "devices"), "tensor_parallel x pipeline_stages must divide devices "
         "(data-parallel size = devices / (tensor_parallel x pipeline_stages))",
         "tensor_parallel x pipeline_stages a divisor of devices", lambda s: s.devices % s.model_parallel != 0),
    Rule(("tensor_parallel", "parallel_mode"), "tensor parallelism needs a shard plan: parallel_mode=semi_auto|auto",
         "tensor_parallel=1 when parallel_mode=data", lambda s: s.tensor_parallel > 1 and s.parallel_mode == "data"),
    Rule(("pipeline_stages", "parallel_mode"), "pipeline parallelism needs parallel_mode=semi_auto|auto "
         "(MindSpore's pipeline_stages acts only in the auto-parallel modes)",
         "pipeline_stages=1 when parallel_mode=data", lambda s: s.pipeline_stages > 1 and s.parallel_mode == "data"),
    Rule(("parallel_mode", "devices"), "semi_auto/auto parallel split work over several cards; on one card they change nothing",
         "parallel_mode=data when devices=1", lambda s: s.parallel_mode != "data" and s.devices == 1),
    Rule(("sequence_parallel", "tensor_parallel"), "sequence parallelism splits activations over the tensor-parallel "
         "group (Korthikanti et al. 2022)", "sequence_parallel=false unless tensor_parallel > 1",
         lambda s: s.sequence_parallel and s.tensor_parallel == 1),
    Rule(("micro_batches", "pipeline_stages"), "a pipeline of p stages needs at least p micro-batches to fill it",
         "micro_batches >= pipeline_stages", lambda s: s.micro_batches < s.pipeline_stages),
    Rule(("micro_batches", "pipeline_stages"), "micro_batches splits the batch for the pipeline; without one it would "
         "change nothing (use grad_accum)", "micro_batches=1 unless pipeline_stages > 1",
         lambda s: s.micro_batches > 1 and s.pipeline_stages == 1),
    Rule(("optimizer_shard", "parallel_mode"), "enable_parallel_optimizer acts in the auto-parallel modes only "
         "(mindspore.set_auto_parallel_context)", "optimizer_shard=false unless parallel_mode=semi_auto|auto",
         lambda s: s.optimizer_shard and s.parallel_mode == "data"),
    Rule(("optimizer_shard", "devices"), "the parallel optimizer shards over the data-parallel group; with one "
         "replica there is nothing to shard", "optimizer_shard=false unless devices / (tensor_parallel x "
         "pipeline_stages) > 1", lambda s: s.optimizer_shard and s.devices % s.model_parallel == 0
         and s.data_parallel == 1),
    Rule(("flash_attention", "amp_level"), "FlashAttentionScore takes float16/bfloat16 only "
         "(mindspore.ops.flash_attention_score); amp_level=O0 computes in fp32",
         "flash_attention=false when amp_level=O0", lambda s: s.flash_attention and s.amp_level == "O0"),
)

DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Settings)}
KNOB_META: dict[str, Mapping[str, Any]] = {f.name: f.metadata for f in fields(Settings)}
UNSET_TYPES: dict[str, type] = {"batch_size": int, "keep_batchnorm_fp32": bool, "max_device_memory": float}   # knobs whose default is "unset"
KNOB_TYPES: dict[str, type] = {f.name: UNSET_TYPES.get(f.name, type(f.default)) for f in fields(Settings)}


def describe_allowed(allowed: tuple | range | FloatRange | None) -> str:
    if isinstance(allowed, FloatRange):
        return f"{allowed.unit} > {allowed.low:g} and <= {allowed.high:g}, or unset"
    if isinstance(allowed, range):
        return f"integer {allowed.start}..{allowed.stop - 1}"
    return "|".join("unset" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for v in allowed or ())


def check_value(name: str, value: Any, where: str = "") -> None:
    """Type and range check of one knob value (already parsed)."""
    allowed = KNOB_META[name]["allowed"]
    if value is None and DEFAULTS[name] is None:
        return
    expected = KNOB_TYPES[name]
    if type(value) is not expected:
        raise ConfigError(name, value, f"{expected.__name__}: {describe_allowed(allowed)}", where)
    if allowed is not None and value not in allowed:
        raise ConfigError(name, value, describe_allowed(allowed), where)


def parse_value(name: str, text: str) -> Any:
    """Parse a command-line string (`--set NAME=VALUE`) into the knob's type."""
    if name not in DEFAULTS:
        raise ConfigError("knob", name, ", ".join(DEFAULTS))
    kind = KNOB_TYPES[name]
    if text.strip().lower() == "unset" and DEFAULTS[name] is None:
        return None
    if kind is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ConfigError(name, text, "true|false")
        return lowered in ("true", "1", "yes", "on")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(name, text, describe_allowed(KNOB_META[name]["allowed"])) from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(name, text, describe_allowed(KNOB_META[name]["allowed"])) from None
    return text.strip()


def parse_assignments(pairs: list[str] | None) -> dict[str, Any]:
    """`["amp_level=O2", "batch_size=64"]` -> `{"amp_level": "O2", "batch_size": 64}`."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        name, sep, text = pair.partition("=")
        if not sep:
            raise ConfigError("--set", pair, "NAME=VALUE")
        name = name.strip()
        out[name] = parse_value(name, text)
    return out


def make_settings(values: Mapping[str, Any], where: str = "") -> Settings:
    """Build Settings from a mapping, naming the unknown knob or bad value (and `where` it came from)."""
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise ConfigError("knob", unknown[0], ", ".join(DEFAULTS), where)
    for name, value in values.items():
        check_value(name, value, where)
    try:
        return Settings(**values)
    except ConfigError as err:
        if where and not err.where:
            raise ConfigError(err.field, err.value, err.allowed, where, err.rule) from None
        raise


def recorded_settings(values: Mapping[str, Any], where: str = "") -> Settings:
    """Settings as a record or an invalid matrix entry holds them: each value checked, the combination
    rules not applied (they judge user input; an `invalid` cell must still read back, with its id)."""
    unknown = sorted(set(values) - set(DEFAULTS))
    if unknown:
        raise ConfigError("knob", unknown[0], ", ".join(DEFAULTS), where)
    for name, value in values.items():
        check_value(name, value, where)
    settings = object.__new__(Settings)
    for name, default in DEFAULTS.items():
        object.__setattr__(settings, name, values.get(name, default))
    return settings
