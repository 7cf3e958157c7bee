"""The Ascend auto-parallel plan of a cell: what `set_auto_parallel_context`, the shard strategies, the
pipeline stages and the flash-attention kernel are asked to do, as plain data.

`plan_parallel` is pure (no MindSpore import) so the Ascend configuration is unit-tested on a CPU host;
`apply_context` and `apply_to_network` are the only places that hand it to MindSpore. API names are
MindSpore 2.10's: `mindspore.set_auto_parallel_context(parallel_mode, search_mode, device_num,
gradients_mean, pipeline_stages, enable_parallel_optimizer)`, `Primitive.shard(in_strategy,
out_strategy)`, `Cell.pipeline_stage`, `nn.PipelineCell(network, micro_size)`.

Layout (Megatron-LM, Shoeybi et al. 2019, as MindSpore's semi-auto plan spells it): with data-parallel
size dp and tensor-parallel size tp, the first matmul of a pair (Q/K/V, FFN gate/up) is column-parallel
-- activations `(dp, 1)`, weight `(tp, 1)` (a `(out, in)` weight split on `out`) -- and the second
(attention output, FFN down) is row-parallel -- activations `(dp, tp)`, weight `(1, tp)` -- whose partial
sums are all-reduced, or reduce-scattered along the tokens (`out_strategy (dp * tp, 1)`) under sequence
parallelism (Korthikanti et al. 2022).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msbench.settings import Settings

PARALLEL_MODES = {"data": "data_parallel", "semi_auto": "semi_auto_parallel", "auto": "auto_parallel"}
SEARCH_MODE = "sharding_propagation"    # AUTO_PARALLEL's strategy search from the annotated matmuls

Strategy = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class MatmulShard:
    """`Primitive.shard(in_strategy, out_strategy)` of one 2-D matmul `x (tokens, in) @ w (out, in)^T`."""

    in_strategy: Strategy
    out_strategy: Strategy | None = None


@dataclass(frozen=True)
class ParallelPlan:
    """Everything the real target asks MindSpore to do for tensor/pipeline/optimizer parallelism."""

    context: tuple[tuple[str, Any], ...]      # set_auto_parallel_context keyword arguments, in call order
    data_parallel: int
    tensor_parallel: int
    pipeline_stages: int
    micro_batches: int                        # nn.PipelineCell micro_size (1 = no PipelineCell)
    column: MatmulShard                       # Q/K/V and FFN gate/up projections
    row: MatmulShard                          # attention output and FFN down projections
    flash_attention: bool                     # ops.flash_attention_score replaces softmax(QK^T)V

    @property
    def sharded(self) -> bool:
        """True when the network needs annotations (any mode other than plain data parallel)."""
        return dict(self.context)["parallel_mode"] != PARALLEL_MODES["data"]

    def loaded_batch(self, per_replica: int) -> int:
        """Samples each rank's pipeline feeds per step: the global batch in the sharded modes
        (dataset_strategy="full_batch": the compiler slices it as the strategies say), else the rank's own."""
        return per_replica * self.data_parallel if self.sharded else per_replica

    def data_shard(self, rank: int, world: int) -> tuple[int, int]:
        """(shard, shards) of the training split a rank reads: all of it when every rank loads the full batch."""
        return (0, 1) if self.sharded else (rank, world)

    def stage_of(self, layer: int, layers: int) -> int:
        """The pipeline stage of decoder layer `layer` of `layers`: consecutive equal groups, the remainder
        spread over the first stages (MindFormers' default `offset` 0 layout)."""
        base, extra = divmod(layers, self.pipeline_stages)
        bounds, start = [], 0
        for stage in range(self.pipeline_stages):
            start += base + (1 if stage < extra else 0)
            bounds.append(start)
        return next(stage for stage, end in enumerate(bounds) if layer < end)


def plan_parallel(settings: Settings, device_num: int | None = None) -> ParallelPlan:
    """The plan for `settings` on `device_num` cards (default: `settings.devices`)."""
    devices = settings.devices if device_num is None else device_num
    dp, tp = devices // settings.model_parallel, settings.tensor_parallel
    context: list[tuple[str, Any]] = [("parallel_mode", PARALLEL_MODES[settings.parallel_mode]),
                                      ("device_num", devices), ("gradients_mean", True)]
    if settings.parallel_mode == "auto":
        context.append(("search_mode", SEARCH_MODE))
    if settings.parallel_mode != "data":
        context.append(("dataset_strategy", "full_batch"))
        context.append(("pipeline_stages", settings.pipeline_stages))
        context.append(("enable_parallel_optimizer", settings.optimizer_shard))
    row_out = ((dp * tp, 1),) if settings.sequence_parallel else None
    return ParallelPlan(
        context=tuple(context), data_parallel=dp, tensor_parallel=tp, pipeline_stages=settings.pipeline_stages,
        micro_batches=settings.micro_batches,
        column=MatmulShard(((dp, 1), (tp, 1))),
        row=MatmulShard(((dp, tp), (1, tp)), row_out),
        flash_attention=settings.flash_attention,
    )


def apply_context(plan: ParallelPlan) -> None:
    """`mindspore.set_auto_parallel_context` with the plan's arguments (after `init()`, before the network)."""
    import mindspore as ms

    ms.set_auto_parallel_context(**dict(plan.context))


def annotate(network: Any, plan: ParallelPlan) -> Any:
    """Put the plan on a network that offers `parallel_layers()`, `embedding_stage` and `head_stage`
    (workloads.transformer.llm.DecoderLM): shard strategies on every block's matmuls, and with a pipeline
    the stage of each block, of the embedding (first) and of the head (last). The training step wraps the
    loss cell in `nn.PipelineCell(loss, micro_batches)` (workloads.train_step). Returns the network."""
    if not plan.sharded:
        return network
    layers = list(network.parallel_layers())
    for index, layer in enumerate(layers):
        layer.shard_matmuls(plan.column, plan.row)
        if plan.pipeline_stages > 1:
            layer.pipeline_stage = plan.stage_of(index, len(layers))
    if plan.pipeline_stages > 1:
        network.embedding_stage(0)
        network.head_stage(plan.pipeline_stages - 1)
    return network
