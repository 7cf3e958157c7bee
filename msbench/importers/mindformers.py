"""A MindFormers training config (its YAML schema: configs/*/pretrain_*.yaml and research/*) as a cell.

The `mindformers` package (2.1.0 on PyPI) needs MindSpore 2.11 and transformers 5, so it cannot be installed
beside MindSpore 2.10, and its config classes import both; its configs are plain YAML, read here with PyYAML
against the documented fields of LlamaConfig / ChatGLM2Config, TransformerOpParallelConfig, the recompute
config, runner_config, context, optimizer and lr_schedule. Defaults are MindFormers' where a field is absent
(LlamaConfig: seq_length 2048, multiple_of 256, n_kv_heads = num_heads, compute_dtype float16).

The network: a decoder-only LLM whose shape equals a built-in preset (llama2-7b full, ...) is that workload;
any other shape is `llm` with preset overrides over Llama 2 7B's (workloads/transformer/workload.py).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from hardware.capabilities import Facts
from msbench.conventions import data_format_or_python
from msbench.errors import ConfigError, UserError
from msbench.importers.fields import ConfigFields, ImportedConfig, Knobs, flatten
from msbench.importers.settle import settle
from msbench.settings import DEFAULTS
from workloads.registry import get_workload
from workloads.transformer.config import llm_parameter_count

FORMAT = "mindformers"
MC = "model.model_config."
# The decoder-only LLMs whose full preset a config may match exactly, and the base of any other shape.
NAMED_LLMS = ("llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b")
ANY_LLM = "llm"
SHAPE_FIELDS = ("layers", "d_model", "heads", "kv_heads", "ff_dim", "vocab_size", "seq_len", "mlp", "norm",
                "positions", "tied", "qkv_bias", "max_positions", "dropout")

# Aliases of one field across MindFormers' model configs (LlamaConfig, ChatGLM2Config, Qwen2's HF-style names).
LAYERS = ("num_layers", "num_hidden_layers")
HIDDEN = ("hidden_size",)
HEADS = ("num_heads", "num_attention_heads")
KV_HEADS = ("n_kv_heads", "num_key_value_heads")
FFN = ("intermediate_size", "ffn_hidden_size")
VOCAB = ("vocab_size", "padded_vocab_size")
QKV_BIAS = ("qkv_has_bias", "add_qkv_bias")
# Qwen 1 (QwenConfig) always builds its fused c_attn with Q/K/V biases and has no key saying so: its published
# 7,721,324,544 parameters hold 32 layers x 3 x 4,096 of them (tools/independent_check found the gap)
ALWAYS_QKV_BIAS = ("QwenConfig",)
SWIGLU_ACTS = ("silu", "swiglu", "swish")
NUMERICS_ONLY = "numerics only: no effect on the step time or memory the device model predicts"
GENERATION = "inference and generation setting: no effect on a training step"
DEBUG = "process, logging or debug setting: no effect on the modelled step"

OPTIMIZERS = {"adamweightdecay": "adamw", "fp32stateadamweightdecay": "adamw", "adamw": "adamw", "adam": "adam",
              "momentum": "momentum", "lamb": "lamb", "lars": "lars"}
LR_SCHEDULES = {"cosinewithwarmuplr": "cosine", "cosine": "cosine", "cosinewithrestartswithwarmuplr": "cosine",
                "cosineannealinglr": "cosine", "polynomial": "poly", "polynomialwithwarmuplr": "poly",
                "constant": "constant", "constantwarmuplr": "constant"}
PARALLEL_MODES = {0: "data", 1: "semi_auto", 2: "auto", "data_parallel": "data", "semi_auto_parallel": "semi_auto",
                  "auto_parallel": "auto"}
MODES = {0: "graph", 1: "pynative", "graph_mode": "graph", "pynative_mode": "pynative"}
FLOAT_DTYPES = {"float16": "O2", "bfloat16": "O2", "float32": "O0"}

# Why each field msbench does not map is not modelled (the longest matching prefix of a dotted path wins).
REASONS: dict[str, str] = {
    **{k: DEBUG for k in ("output_dir", "load_checkpoint", "src_strategy_path_or_dir", "auto_trans_ckpt",
                          "only_save_strategy", "resume_training", "callbacks", "eval_callbacks", "remote_save_url",
                          "profile", "profile_start_step", "profile_stop_step", "init_start_profile",
                          "profile_communication", "profile_memory", "auto_tune", "filepath_prefix",
                          "autotune_per_step", "context.device_id", "context.max_call_depth", "context.save_graphs",
                          "context.save_graphs_path", "context.runtime_num_threads", "trainer.model_name",
                          "model.model_config.checkpoint_name_or_path", "parallel.strategy_ckpt_save_file",
                          "parallel.strategy_ckpt_config", "processor")},
    **{k: NUMERICS_ONLY for k in ("optimizer", "lr_schedule", "runner_wrapper.scale_sense",
                                  "runner_wrapper.max_grad_norm", "layer_scale", "layer_decay", "lr_scale",
                                  "lr_scale_factor", "parallel.gradients_mean", "parallel.loss_repeated_mean",
                                  "metric")},
    **{MC + k: NUMERICS_ONLY for k in ("rms_norm_eps", "layernorm_epsilon", "theta", "rope_theta",
                                       "rotary_emb_base", "init_method_std", "initializer_range",
                                       "apply_query_key_layer_scaling", "attention_softmax_in_fp32",
                                       "fp32_residual_connection", "bias_dropout_fusion", "scaling_factor",
                                       "emb_dropout_prob", "attention_dropout", "embedding_init_type",
                                       "ignore_token_id", "bos_token_id", "eos_token_id", "pad_token_id")},
    **{MC + k: GENERATION for k in ("batch_size", "use_past", "extend_method", "is_dynamic", "block_size",
                                    "num_blocks", "repetition_penalty", "max_decode_length", "top_k", "top_p",
                                    "do_sample", "use_past_shard", "pre_seq_len", "prefix_projection",
                                    "quantization_bit", "quant", "max_position_embedding", "seq_length_for_infer")},
    **{MC + k: "a MindFormers kernel or layout choice the device model does not model (it lowers its own block)"
       for k in ("fine_grain_interleave", "qkv_concat", "use_rope_slice", "compute_in_2d",
                 "use_attn_mask_compression", "pp_interleave_num", "offset", "parallel_optimizer",
                 "rotary_pct")},
    **{MC + k: "per-op precision: amp_level O2 computes the matmuls in fp16 and keeps norms and the loss in fp32; "
       "finer dtypes are not knobs" for k in ("layernorm_compute_type", "softmax_compute_type", "rotary_dtype")},
    MC + "param_init_type": "the LLM composition keeps fp32 master weights and fp32 optimizer states (the layout "
                            "of FP32StateAdamWeightDecay); fp16 parameter storage is not modelled",
    "trainer.type": "the task: a causal-LM pretraining/finetuning step is what the LLM composition predicts",
    "run_mode": "a training step is what is predicted (msbench predict --scenario train)",
    "do_eval": "evaluation: not part of a training step",
    "eval_step_interval": "evaluation: not part of a training step",
    "eval_epoch_interval": "evaluation: not part of a training step",
    "eval_dataset": "evaluation: not part of a training step",
    "eval_dataset_task": "evaluation: not part of a training step",
    "train_dataset": "the LLM composition does not model the host data pipeline (a token batch is a few KB per "
                     "sample)",
    "train_dataset_task": "the task wrapper around train_dataset (the same table; its fields are read there)",
    "train_dataset.data_loader.dataset_dir": "where the data lives: the step does not depend on it",
    "train_dataset.data_loader.shuffle": NUMERICS_ONLY,
    "train_dataset.input_columns": "the LLM composition feeds token ids (input_ids) to every cell",
    "train_dataset.repeat": "epochs: one step is predicted",
    "train_dataset.numa_enable": "host NUMA binding: the LLM composition does not model the host data pipeline",
    "train_dataset.seed": NUMERICS_ONLY,
    "train_dataset.batch_size": "MindFormers replaces it by runner_config.batch_size (read there)",
    "runner_config.epochs": "epochs: one step is predicted",
    "runner_config.initial_epoch": "epochs: one step is predicted",
    "runner_wrapper.type": "MindFormers' training-step cell: msbench's step is one update with the loss scaler "
                           "and clipping named by the knobs",
    "parallel.enable_alltoall": "all-to-all is for MoE expert parallelism, which is not modelled",
    "parallel.full_batch": "each card's batch is runner_config.batch_size either way here",
    "parallel.search_mode": "sharding propagation: parallel_mode=auto costs the semi_auto plan it extends",
    "parallel.parallel_optimizer_config": "the parallel optimizer's thresholds and accumulation sharding: "
                                          "optimizer_shard shards every state over the data-parallel group",
    "parallel_config.vocab_emb_dp": "the device model always splits the vocabulary over the tensor-parallel group "
                                    "(Megatron's vocabulary-parallel embedding)",
    "parallel_config.gradient_aggregation_group": "the device model fuses the data-parallel gradient all-reduce "
                                                  "in its own buckets (hardware/model/llm/comm.py)",
    "parallel_config.expert_parallel": "MoE expert parallelism is not modelled (dense decoders only)",
    "micro_batch_interleave_num": "interleaving two micro-batches to hide tensor-parallel communication is not "
                                  "modelled",
    "recompute_config.parallel_optimizer_comm_recompute": "recomputed communication is not modelled: recompute "
                                                          "re-runs the block's forward kernels",
    "recompute_config.mp_comm_recompute": "recomputed communication is not modelled: recompute re-runs the "
                                          "block's forward kernels",
    "recompute_config.recompute_slice_activation": "sliced recompute activations are not modelled",
    "moe_config": "MoE is not modelled (dense decoders only; expert_num must be 1)",
    "context.device_target": "the target is the --hardware profile a prediction names",
    "context.ascend_config": "CANN precision and operator settings: not modelled",
    "context.graph_kernel_flags": "graph-kernel fusion flags: graph_kernel is modelled on or off only",
    "model.arch.type": "the network class: read as a decoder-only causal LM of the model_config's shape",
}


def op_level_recompute(value: Any) -> tuple[str, str]:
    """The recompute knob for `select_recompute`: `true` or per-stage layer counts are Megatron's selective
    recompute (the attention core), msbench's `selective`. A list (or a {pattern: layers} map) of op-name patterns
    is MindFormers' op-level selection, another thing: it re-runs exactly the ops named. Named MatMuls or flash
    attention are most of a block's forward work, so it is costed as `full` (over-stated by the ops left out);
    elementwise and norm ops alone are little work, costed as `selective` (under-stated by their re-run)."""
    patterns = [str(k) for k in value] if isinstance(value, (list, dict)) else []
    if not patterns or all(isinstance(k, (int, bool)) for k in value):
        return "selective", ""
    heavy = [p for p in patterns if re.search(r"matmul|flash", p, re.IGNORECASE)]
    if heavy:
        return "full", (f" (an op-level selection of {len(patterns)} op patterns, {len(heavy)} of them MatMuls or "
                        "flash attention, most of a block's forward: costed as full recompute, which over-states it "
                        "by the ops left out; msbench's selective is the attention core's recompute)")
    return "selective", (f" (an op-level selection of {len(patterns)} elementwise or norm op patterns, little "
                         "work to re-run: costed as selective recompute, which under-states it by their re-run)")


def ffn_width(hidden: int, multiple_of: int, multiplier: float | None) -> int:
    """MindFormers' LlamaFeedForward width when intermediate_size is absent: 4·hidden, times
    (ffn_dim_multiplier + 0.01) when set, times 2/3, rounded up to a multiple of `multiple_of`
    (models/llama/llama_layer.py; Llama 2 7B: 11008, Llama 3 8B with 1.3 and 1024: 14336)."""
    width = 4 * hidden
    if multiplier is not None:
        width = int((multiplier + 0.01) * width)
    width = int(2 * width / 3)
    return multiple_of * ((width + multiple_of - 1) // multiple_of)


def _key(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _int(path: str | None, value: Any, where: str, low: int = 1) -> int:
    if type(value) is not int or value < low:
        raise ConfigError(path or "?", value, f"an integer >= {low}", where)
    return value


def _gib(text: Any, path: str, where: str) -> float:
    """MindFormers' max_device_memory ("58GB") in GiB."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*GB\s*", str(text))
    if not match:
        raise ConfigError(path, text, 'a size such as "58GB"', where)
    return float(match.group(1))


def network_shape(f: ConfigFields, where: str) -> dict[str, Any]:
    """The LLMPreset fields the model_config gives (with MindFormers' defaults), each field's use recorded."""
    path, layers = f.first(tuple(MC + k for k in LAYERS), 32)
    f.preset(path, "layers", _int(path, layers, where))
    path, hidden = f.first(tuple(MC + k for k in HIDDEN), 4096)
    f.preset(path, "d_model", _int(path, hidden, where))
    path, heads = f.first(tuple(MC + k for k in HEADS), 32)
    f.preset(path, "heads", _int(path, heads, where))
    kv_path, kv_heads = f.first(tuple(MC + k for k in KV_HEADS), None)
    if f.get(MC + "multi_query_attention"):                                # ChatGLM2/3: query groups
        f.preset(MC + "multi_query_attention", "kv_heads", "multi_query_group_num")
        kv_path, kv_heads = MC + "multi_query_group_num", f.get(MC + "multi_query_group_num", 1)
    elif f.has(MC + "multi_query_attention"):
        f.preset(MC + "multi_query_attention", "kv_heads", heads, " (false: one kv head per query head)")
    kv_heads = heads if kv_heads is None else _int(kv_path, kv_heads, where)
    f.preset(kv_path, "kv_heads", kv_heads)
    ffn_path, ff_dim = f.first(tuple(MC + k for k in FFN), None)
    if ff_dim is None:
        multiple_of = _int(MC + "multiple_of", f.get(MC + "multiple_of", 256), where)
        multiplier = f.get(MC + "ffn_dim_multiplier")
        ff_dim = ffn_width(hidden, multiple_of, multiplier)
        rule = " (MindFormers' rule: 4 x hidden, x (multiplier + 0.01), x 2/3, up to a multiple of multiple_of)"
        f.preset(MC + "multiple_of", "ff_dim", ff_dim, rule)
        f.preset(MC + "ffn_dim_multiplier", "ff_dim", ff_dim, rule)
    else:
        f.preset(ffn_path, "ff_dim", _int(ffn_path, ff_dim, where))
        for unused in ("multiple_of", "ffn_dim_multiplier"):
            f.skip(MC + unused, f"{ffn_path} gives the FFN width")
    path, vocab = f.first(tuple(MC + k for k in VOCAB), 32000)
    f.preset(path, "vocab_size", _int(path, vocab, where))
    seq = _int(MC + "seq_length", f.get(MC + "seq_length", 2048), where)
    f.preset(MC + "seq_length", "seq_len", seq)
    act = _key(f.get(MC + "hidden_act", "silu"))
    if act not in SWIGLU_ACTS + ("gelu",):
        raise ConfigError(MC + "hidden_act", act, "silu|swiglu (gated SiLU FFN) or gelu", where)
    mlp = "swiglu" if act in SWIGLU_ACTS else "gelu"
    f.preset(MC + "hidden_act", "mlp", mlp)
    norm = "layernorm" if f.has(MC + "rmsnorm") and not f.get(MC + "rmsnorm") else "rmsnorm"
    f.preset(MC + "rmsnorm", "norm", norm)
    implied = f.get(MC + "type") in ALWAYS_QKV_BIAS
    qkv_path, qkv_bias = f.first(tuple(MC + k for k in QKV_BIAS), implied)
    f.preset(qkv_path, "qkv_bias", bool(qkv_bias))
    if f.get(MC + "add_bias_linear"):
        raise ConfigError(MC + "add_bias_linear", True, "false (biases on every projection exist only with "
                          "LayerNorm in msbench's decoder: GPT-3's layout)", where)
    f.skip(MC + "add_bias_linear", "false: no biases beyond the query/key/value ones (the decoder's default)")
    tied = bool(f.get(MC + "tie_word_embeddings", False))
    f.preset(MC + "tie_word_embeddings", "tied", tied)
    dropout = f.get(MC + "hidden_dropout", f.get(MC + "hidden_dropout_prob", 0.0))
    f.preset(MC + "hidden_dropout", "dropout", float(dropout))
    f.preset(MC + "hidden_dropout_prob", "dropout", float(dropout))
    for key in ("post_layer_norm", "apply_residual_connection_post_layernorm"):
        f.skip(MC + key, "pre-norm blocks and a final norm: the decoder's layout either way")
    f.skip(MC + "rope_ratio", NUMERICS_ONLY)
    head_dim = hidden // heads
    if f.has(MC + "kv_channels") and f.get(MC + "kv_channels") != head_dim:
        raise ConfigError(MC + "kv_channels", f.get(MC + "kv_channels"), f"hidden_size / num_heads = {head_dim} "
                          "(msbench's decoder derives the head dimension)", where)
    f.preset(MC + "kv_channels", "head_dim", head_dim, " (d_model / heads: checked, not a field)")
    glm = " (ChatGLM rotates half of each head's dimensions: costed as rotating all of them)" \
        if f.get(MC + "type") == "ChatGLM2Config" else ""
    if implied and qkv_path is None:
        glm += " (QwenConfig: Q/K/V biases, which its attention always has)"
    f.preset(MC + "type", "family", "decoder-only LLM", f" (its fields are read as the shape){glm}")
    return {"layers": layers, "d_model": hidden, "heads": heads, "kv_heads": kv_heads, "ff_dim": ff_dim,
            "vocab_size": vocab, "seq_len": seq, "mlp": mlp, "norm": norm, "positions": "rotary", "tied": tied,
            "qkv_bias": bool(qkv_bias), "max_positions": 0, "dropout": float(dropout)}


def match_workload(shape: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(workload, overrides, note): a built-in LLM whose full preset has exactly this shape, else `llm` with
    the fields that differ from its base (Llama 2 7B)."""
    for name in NAMED_LLMS:
        preset = get_workload(name).preset("full")
        if all(getattr(preset, k) == v for k, v in shape.items()):
            return name, {}, f"the {name} full preset (every shape field equal)"
    base = get_workload(ANY_LLM).preset("full")
    overrides = {k: v for k, v in shape.items() if getattr(base, k) != v}
    return ANY_LLM, overrides, "llm: Llama 2 7B's full preset with " + (
        ", ".join(f"{k}={v}" for k, v in overrides.items()) or "no overrides")


def step_knobs(f: ConfigFields, where: str) -> dict[str, Any]:
    """The knobs the config's runner, parallel, recompute, context, optimizer and precision fields give."""
    knobs = Knobs(f)
    put = knobs.put

    mode = MODES.get(_key(f.get("context.mode", 0)))
    if mode is None:
        raise ConfigError("context.mode", f.get("context.mode"), "0 (GRAPH_MODE) or 1 (PYNATIVE_MODE)", where)
    put("context.mode", "mode", mode)
    if f.has("context.jit_config.jit_level"):
        put("context.jit_config.jit_level", "jit_level", f.get("context.jit_config.jit_level"))
    if f.has("context.enable_graph_kernel"):
        put("context.enable_graph_kernel", "graph_kernel", bool(f.get("context.enable_graph_kernel")))
    if f.has("context.max_device_memory"):
        put("context.max_device_memory", "max_device_memory",
            _gib(f.get("context.max_device_memory"), "context.max_device_memory", where))
    if f.has("context.memory_optimize_level"):
        put("context.memory_optimize_level", "memory_optimize_level", f.get("context.memory_optimize_level"))
    if f.has("seed"):
        put("seed", "seed", f.get("seed"))

    # Layout: standalone unless use_parallel; data x model x pipeline cards (TransformerOpParallelConfig).
    parallel = bool(f.get("use_parallel", False))
    f.knob("use_parallel", "devices", "dp x mp x pp" if parallel else 1)
    dp = _int("parallel_config.data_parallel", f.get("parallel_config.data_parallel", 1), where)
    tp = _int("parallel_config.model_parallel", f.get("parallel_config.model_parallel", 1), where)
    pp = _int("parallel_config.pipeline_stage", f.get("parallel_config.pipeline_stage", 1), where)
    micro = _int("parallel_config.micro_batch_num", f.get("parallel_config.micro_batch_num", 1), where)
    if f.get("parallel_config.expert_parallel", 1) != 1 or f.get("moe_config.expert_num", 1) != 1:
        raise UserError(f"{where}: a mixture-of-experts config (moe_config.expert_num or "
                        "parallel_config.expert_parallel above 1) is not modelled; the device model composes dense "
                        "decoders only")
    if not parallel:
        for key in ("data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num", "use_seq_parallel"):
            f.skip(f"parallel_config.{key}", "use_parallel is false: MindFormers runs on one card")
        f.skip("parallel.parallel_mode", "use_parallel is false: MindFormers runs on one card")
        f.skip("parallel.enable_parallel_optimizer", "use_parallel is false: MindFormers runs on one card")
        dp = tp = pp = micro = 1
        put(None, "devices", 1)
    else:
        put("parallel_config.data_parallel", "devices", dp * tp * pp, " (data x model x pipeline parallel)")
        f.knob("parallel_config.model_parallel", "tensor_parallel", tp)
        f.knob("parallel_config.pipeline_stage", "pipeline_stages", pp)
        knobs.update(tensor_parallel=tp, pipeline_stages=pp)      # recorded above, with the fields' own text
        raw_mode = f.get("parallel.parallel_mode", 1)
        pmode = PARALLEL_MODES.get(_key(raw_mode))
        if pmode is None:
            raise ConfigError("parallel.parallel_mode", raw_mode, "0 (data), 1 (semi-auto) or 2 (auto); 3 (hybrid) "
                              "is not modelled", where)
        put("parallel.parallel_mode", "parallel_mode", pmode)
        put("parallel_config.micro_batch_num", "micro_batches", micro)
        put("parallel_config.use_seq_parallel", "sequence_parallel", bool(f.get("parallel_config.use_seq_parallel")))
        put("parallel.enable_parallel_optimizer", "optimizer_shard",
            bool(f.get("parallel.enable_parallel_optimizer", False)))
    batch = _int("runner_config.batch_size", f.get("runner_config.batch_size", 1), where)
    split = micro if pp > 1 else 1                 # micro_batch_num acts only with a pipeline (PipelineCell)
    put("runner_config.batch_size", "batch_size", batch * split,
        f" (x {split} micro-batches: msbench's batch is a replica's per step)" if split > 1 else "")
    put("runner_config.gradient_accumulation_steps", "grad_accum",
        _int("runner_config.gradient_accumulation_steps", f.get("runner_config.gradient_accumulation_steps", 1),
             where))
    put("runner_config.sink_mode", "sink", bool(f.get("runner_config.sink_mode", True)))
    if f.has("runner_config.sink_size") and f.get("runner_config.sink_mode", True):
        put("runner_config.sink_size", "sink_size", f.get("runner_config.sink_size"))

    # Recompute: full (recompute: true or a per-stage layer list) over selective over none.
    full, selective = "recompute_config.recompute", "recompute_config.select_recompute"
    if f.get(full):
        stages = f.get(full)
        put(full, "recompute", "full", "" if not isinstance(stages, list) else
            f" (the per-stage layer list {stages}: costed as every layer recomputed; recompute of some layers is "
            "not modelled, so this over-states recompute's cost)")
        f.knob(selective, "recompute", "full", " (recompute: true takes precedence)")
    elif f.get(selective) or f.under(selective):
        mapping = f.under(selective)          # {op pattern: layers per stage}, flattened into one leaf per pattern
        value, how = op_level_recompute(f.get(selective) or mapping)
        put(selective if f.has(selective) else None, "recompute", value, how)
        for path in (f"{selective}.{name}" for name in mapping):
            f.knob(path, "recompute", value, how)
        f.knob(full, "recompute", value, " (full recompute off)")
    else:
        put(full, "recompute", "none")
        f.knob(selective, "recompute", "none")

    # Precision, loss scale, clipping, attention, optimizer.
    dtype = _key(f.get(MC + "compute_dtype", "float16"))
    if dtype not in FLOAT_DTYPES:
        raise ConfigError(MC + "compute_dtype", dtype, "|".join(FLOAT_DTYPES), where)
    put(MC + "compute_dtype", "amp_level", FLOAT_DTYPES[dtype],
        " (bfloat16 costed as float16: the cube's bf16 and fp16 rates are one datasheet figure)"
        if dtype == "bfloat16" else "")
    scale = f.get("runner_wrapper.scale_sense.type", f.get("runner_wrapper.scale_sense"))
    loss_scale = ("dynamic" if _key(scale) == "dynamiclossscaleupdatecell" else
                  "static" if _key(scale) == "fixedlossscaleupdatecell" or
                  (isinstance(scale, (int, float)) and scale != 1) else "none")
    path = "runner_wrapper.scale_sense.type" if f.has("runner_wrapper.scale_sense.type") else "runner_wrapper.scale_sense"
    put(path if f.has(path) else None, "loss_scale", loss_scale)
    if f.get("runner_wrapper.use_clip_grad"):
        put("runner_wrapper.use_clip_grad", "grad_clip", "global_norm")
    put(MC + "use_flash_attention", "flash_attention", bool(f.get(MC + "use_flash_attention", False)))
    knobs.named("optimizer.type", OPTIMIZERS, "optimizer")
    knobs.named("lr_schedule.type", LR_SCHEDULES, "lr_schedule")
    workers = f.get("train_dataset.num_parallel_workers")
    if workers is not None:
        put("train_dataset.num_parallel_workers", "workers", workers)
    for key, knob in (("prefetch_size", "prefetch"), ("python_multiprocessing", "python_multiprocessing"),
                      ("drop_remainder", "drop_remainder")):
        if f.has(f"train_dataset.{key}"):
            put(f"train_dataset.{key}", knob, f.get(f"train_dataset.{key}"))
    if f.has("train_dataset.data_loader.type"):
        put("train_dataset.data_loader.type", "data_format", data_format_or_python(f.get("train_dataset.data_loader.type")))
    return dict(knobs)


def is_mindformers(data: Mapping[str, Any]) -> bool:
    model = data.get("model")
    return isinstance(model, Mapping) and isinstance(model.get("model_config"), Mapping)


def import_mindformers(data: Mapping[str, Any], file: str, leaves: ConfigFields | None = None) -> ImportedConfig:
    f = leaves or ConfigFields(flatten(data))
    if _key(f.get("run_mode", "train")) not in ("train", "finetune"):
        raise ConfigError("run_mode", f.get("run_mode"), "train|finetune (msbench predicts a training step)", file)
    shape = network_shape(f, file)
    workload, overrides, note = match_workload(shape)
    preset = get_workload(workload).preset("full", overrides)     # the preset's own checks, naming the field
    knobs = settle(f, step_knobs(f, file), file, facts=Facts(llm_composition=True))
    knobs = {k: v for k, v in knobs.items() if v != DEFAULTS[k]}      # what enters the cell (Settings.non_default)
    return ImportedConfig(file=file, format=FORMAT, workload=workload, preset="full", overrides=overrides,
                          knobs=knobs, fields=f.account(REASONS), parameters=llm_parameter_count(preset),  # type: ignore[arg-type]
                          shape_note=note)

