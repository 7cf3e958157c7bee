"""`predict` for a decoder-only LLM cell: the composition of hardware/model/llm/compose.py as a Prediction.

`predict_llm` is pure (graphs, settings, profile in; the Prediction out); `predict_llm_cell` is the
impure wrapper that extracts the three small graphs (cached) for target.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hardware.model.compute import matrix_tflops
from hardware.model.llm.compose import LlmStep, compose
from hardware.model.llm.extraction import CellParts, LlmGraphs, llm_costs, llm_graphs, vocab_shard
from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.predict import Prediction, canonical
from hardware.model.profile import HardwareProfile
from msbench.settings import Settings
from workloads.transformer.config import llm_parameter_count

if TYPE_CHECKING:
    from hardware.model.plan import CellPlan

COMM_PARTS = ("tp_comm", "pp_send", "dp_comm")


def decoder_shape(preset: Any) -> DecoderShape:
    return DecoderShape(layers=preset.layers, hidden=preset.d_model, heads=preset.heads, kv_heads=preset.kv_heads,
                        ffn=preset.ff_dim, vocab=preset.vocab_size, seq=preset.seq_len,
                        gated_ffn=preset.mlp == "swiglu", dropout=preset.dropout > 0)


def micro_batch(settings: Settings, preset: Any) -> int:
    """Samples per pipeline micro-batch: each replica's batch (the knob, else the preset's) split into
    `micro_batches` (MindSpore's PipelineCell; the workload refuses a split that does not divide)."""
    return (settings.batch_size or preset.batch_size) // settings.micro_batches


def parallel_layout(settings: Settings, preset: Any) -> Parallel:
    """The composition's layout. Gradient accumulation repeats the micro-batches within the step: they are
    counted as more micro-batches of one 1F1B schedule (one bubble per optimizer step)."""
    return Parallel(tp=settings.tensor_parallel, pp=settings.pipeline_stages, dp=settings.data_parallel,
                    micro_batch=micro_batch(settings, preset), micro_batches=settings.micro_batches * settings.grad_accum,
                    sequence_parallel=settings.sequence_parallel, optimizer_shard=settings.optimizer_shard,
                    recompute=settings.recompute, flash_attention=settings.flash_attention)


def step_prediction(step: LlmStep, par: Parallel, profile: HardwareProfile, estimates: tuple[str, ...] = ()
                    ) -> Prediction:
    samples = par.micro_batches * par.micro_batch * par.dp
    throughput = samples / step.step_time_s if step.step_time_s > 0 else 0.0
    comm = sum(step.breakdown[k] for k in COMM_PARTS)
    peak = matrix_tflops("fp16", profile)
    mem = step.memory
    return Prediction(
        step_time_s=step.step_time_s, throughput=throughput, throughput_per_device=throughput / par.devices,
        peak_memory_bytes=mem.peak, memory_capacity_bytes=mem.capacity, oom=mem.oom,
        bound="comm" if comm > step.breakdown["compute"] else "compute", breakdown=dict(step.breakdown),
        mfu=step.mfu(peak), memory=mem.to_dict(),
        detail=canonical({**step.detail, "tokens_per_step": step.tokens_per_step,
                          "tokens_per_s_per_device": step.tokens_per_s_per_device,
                          "model_flops_per_token": step.model_flops_per_token,
                          "bubble_fraction": step.bubble_fraction, "peak_tflops": peak,
                          "profile": profile.name, "profile_hash": profile.digest,
                          "composition": "llm blocks (hardware/model/llm)", "estimates": list(estimates)}))


def predict_llm(graphs: LlmGraphs, preset: Any, settings: Settings, profile: HardwareProfile,
                total_params: int) -> Prediction:
    shape, par = decoder_shape(preset), parallel_layout(settings, preset)
    costs = llm_costs(graphs, settings, profile, vocab_shard(shape.vocab, par.tp), preset.tied, total_params)
    step = compose(shape, par, costs.block, costs.first, costs.last, costs.params, profile)
    return step_prediction(step, par, profile, costs.estimates)


def cell_parts(plan: "CellPlan") -> CellParts:
    """The parts the cell is composed of; a layout the model cannot be split by is refused first."""
    cell, preset = plan.cell, plan.spec
    parallel_layout(cell.settings, preset).check(decoder_shape(preset))
    return CellParts(cell.workload, cell.preset, preset, cell.overrides, cell.settings,
                     micro_batch(cell.settings, preset))


def predict_llm_cell(plan: "CellPlan") -> tuple[Prediction, LlmGraphs]:
    parts = cell_parts(plan)
    graphs = llm_graphs(parts)
    return predict_llm(graphs, parts.preset, plan.settings, plan.profile, llm_parameter_count(parts.preset)), graphs
