"""The one training step every target runs: network + loss + optimizer + AMP + loss scaling +
recompute + gradient accumulation, built from a workload, a preset and the cell's Settings.

One call of `TrainStep.cell` is ONE optimizer update: it takes `grad_accum` micro-batches stacked
along axis 0 (`grad_accum * micro_batch` samples per device) and splits them inside `construct`,
so "a step" means the same thing to the real target, the device model and the accuracy runs.

The global MindSpore context (mode, device, jit level) is the caller's business: the real target
sets it in its isolated child process before building; this module only seeds the initialiser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msbench.settings import Settings
from workloads.parallel_plan import plan_parallel

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn

    from workloads.base import Preset, Workload

# Loss-scaling constants: MindSpore's DynamicLossScaleManager default window is 2000 steps, far
# longer than a tiny accuracy run; 2**16 with a 50-step window lets the scale both fall and grow.
STATIC_LOSS_SCALE = 1024.0
DYNAMIC_LOSS_SCALE = 2.0**16
DYNAMIC_SCALE_FACTOR = 2
DYNAMIC_SCALE_WINDOW = 50
# The clipping threshold (`grad_clip`): BERT's (the model zoo's GRADIENT_CLIP_VALUE) and MindFormers'
# max_grad_norm. It changes no kernel, only the numbers (the model-zoo Transformer uses 5.0).
GRAD_CLIP_NORM = 1.0
# Step schedule: divide the rate by 10 at every third of the run (the classic ImageNet shape).
STEP_DECAY_RATE = 0.1
STEP_DECAY_PARTS = 3
WEIGHT_DECAY = 1e-4


def micro_batch_size(preset: "Preset", settings: Settings) -> int:
    """Samples per device per micro-batch: the `batch_size` knob, else the preset's."""
    return settings.batch_size or preset.batch_size


def step_batch_size(preset: "Preset", settings: Settings) -> int:
    """Samples one call of the step cell takes on one device: all `grad_accum` micro-batches stacked."""
    return micro_batch_size(preset, settings) * settings.grad_accum


def global_samples_per_step(preset: "Preset", settings: Settings) -> int:
    """Samples consumed by one optimizer update over all model replicas and micro-batches (tensor- and
    pipeline-parallel cards share their replica's batch)."""
    return step_batch_size(preset, settings) * settings.data_parallel


def batch_ratio(preset: "Preset", settings: Settings) -> float:
    """Global samples per update over the preset's own batch (the batch its `lr` was tuned for)."""
    return global_samples_per_step(preset, settings) / preset.batch_size


def scaled_lr(preset: "Preset", settings: Settings) -> float:
    """The preset's rate is for its own batch; `lr_scaling=linear` multiplies it by the batch ratio
    (Goyal et al. 2017, "Accurate, Large Minibatch SGD", section 2.1), `none` keeps it."""
    return preset.lr * (batch_ratio(preset, settings) if settings.lr_scaling == "linear" else 1.0)


def warmup_steps(preset: "Preset", settings: Settings, total_steps: int) -> int:
    """Updates of gradual warm-up (Goyal et al. section 2.2: from the preset's rate to the scaled one,
    linearly): only when the linear rule raised the rate. Goyal warm up 5 of 90 epochs; the tiny runs
    train a few epochs, so one epoch (estimate; at most half the run) is the shortest span that lets
    BatchNorm statistics and momentum settle before the full rate."""
    if settings.lr_scaling != "linear" or batch_ratio(preset, settings) <= 1:
        return 0
    return max(1, min(steps_per_epoch(preset, settings), total_steps // 2))


def lr_rule(preset: "Preset", settings: Settings, total_steps: int) -> str:
    """The learning-rate rule a run applied, in words (records and reports say it)."""
    ratio = batch_ratio(preset, settings)
    if settings.lr_scaling == "none" or ratio == 1:
        return f"preset lr {preset.lr:g}" + (" (lr_scaling=none)" if ratio != 1 else "")
    warm = warmup_steps(preset, settings, total_steps)
    text = f"linear: lr {preset.lr:g} x {ratio:g} = {scaled_lr(preset, settings):g}"
    return text + (f", warm-up over {warm} updates" if warm else "")


def steps_per_epoch(preset: "Preset", settings: Settings) -> int:
    """Optimizer updates in one epoch of the training split (batches are dropped, never padded)."""
    return max(1, preset.train_samples // global_samples_per_step(preset, settings))


def learning_rate(preset: "Preset", settings: Settings, total_steps: int) -> Any:
    """A float (constant, no warm-up) or a MindSpore LearningRateSchedule spanning `total_steps` updates."""
    from mindspore import nn

    lr = scaled_lr(preset, settings)
    total_steps = max(1, total_steps)
    schedule: Any
    if settings.lr_schedule == "constant":
        schedule = lr
    elif settings.lr_schedule == "cosine":
        schedule = nn.CosineDecayLR(min_lr=0.0, max_lr=lr, decay_steps=total_steps)
    elif settings.lr_schedule == "poly":
        schedule = nn.PolynomialDecayLR(learning_rate=lr, end_learning_rate=lr * 1e-3, decay_steps=total_steps,
                                        power=2.0)
    elif settings.lr_schedule == "step":
        schedule = nn.ExponentialDecayLR(learning_rate=lr, decay_rate=STEP_DECAY_RATE,
                                         decay_steps=max(1, math.ceil(total_steps / STEP_DECAY_PARTS)), is_stair=True)
    else:
        raise ValueError(f"lr_schedule={settings.lr_schedule!r} has no builder")
    warm = warmup_steps(preset, settings, total_steps)
    return _warm_up_then()(preset.lr, lr, warm, schedule) if warm else schedule


def _warm_up_then() -> type:
    """The warm-up schedule, defined on first use so that importing this module needs no MindSpore."""
    import mindspore as ms
    from mindspore import ops
    from mindspore.nn.learning_rate_schedule import LearningRateSchedule

    class WarmUpThen(LearningRateSchedule):
        """min(linear ramp start -> peak over `steps` updates, the schedule): the ramp while it is
        lower, then the schedule (which starts at the peak)."""

        def __init__(self, start: float, peak: float, steps: int, schedule: Any) -> None:
            super().__init__()
            self.start, self.peak, self.steps = start, peak, float(steps)
            self.schedule = schedule if isinstance(schedule, LearningRateSchedule) else None
            self.constant = ms.Tensor(float(peak), ms.float32) if self.schedule is None else None

        def construct(self, global_step):
            step = ops.cast(global_step, ms.float32)
            ramp = self.start + (self.peak - self.start) * ops.minimum(step / self.steps, 1.0)
            after = self.constant if self.schedule is None else self.schedule(global_step)
            return ops.minimum(ramp, after)

    return WarmUpThen


def make_optimizer(params: list, settings: Settings, lr: Any) -> "nn.Optimizer":
    """The `optimizer` knob as MindSpore's own optimizer cells (LARS wraps Momentum, as in MindSpore)."""
    from mindspore import nn

    name = settings.optimizer
    if name == "momentum":
        return nn.Momentum(params, lr, momentum=0.9)
    if name == "adam":
        return nn.Adam(params, lr)
    if name == "adamw":
        return nn.AdamWeightDecay(params, lr, weight_decay=WEIGHT_DECAY)
    if name == "lars":
        return nn.LARS(nn.Momentum(params, lr, momentum=0.9, weight_decay=WEIGHT_DECAY), epsilon=1e-5,
                       coefficient=0.001)
    if name == "lamb":
        return nn.Lamb(params, lr, weight_decay=WEIGHT_DECAY)
    raise ValueError(f"optimizer={name!r} has no builder")


def apply_amp(network: "nn.Cell", settings: Settings) -> "nn.Cell":
    """`amp_level` + `keep_batchnorm_fp32`, with the rules of `ms.amp.build_train_network`: O1 casts the
    white list; O2/O3 cast the whole network to fp16 and, when keep_batchnorm_fp32, put the norm layers
    (MindSpore's AMP black list: BatchNorm, LayerNorm) back to fp32. Unset, the knob follows the level as
    in MindSpore (O2 keeps norms fp32, O3 does not); `amp_effective` names what was applied."""
    import mindspore as ms

    if settings.amp_level == "O0":
        return network
    if settings.amp_level == "O1":
        return ms.amp.auto_mixed_precision(network, "O1")
    return ms.amp.auto_mixed_precision(network, "O2" if settings.batchnorm_in_fp32 else "O3")


def amp_effective(settings: Settings) -> str:
    """What `apply_amp` really did, for records: O0, O1, or O2/O3 by the norm layers' precision."""
    if settings.amp_level in ("O0", "O1"):
        return settings.amp_level
    return "fp16, norms fp32" if settings.batchnorm_in_fp32 else "fp16 everywhere"


def apply_recompute(workload: "Workload", network: "nn.Cell", settings: Settings) -> int:
    """Mark the workload's blocks for recomputation (`selective`: the marked ones; `full`: every block).
    Returns how many blocks were marked, so a knob that marks nothing can be refused, never ignored."""
    if settings.recompute == "none":
        return 0
    blocks = workload.recompute_blocks(network, full=settings.recompute == "full")
    for block in blocks:
        block.recompute()
    return len(blocks)


def _cells():
    """The nn.Cell subclasses, defined lazily so importing this module never imports MindSpore."""
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.common import dtype as mstype
    from mindspore.ops import functional as F

    class LossNet(nn.Cell):
        """network + loss; network outputs are cast back to fp32 before the loss (as MindSpore's AMP does)."""

        def __init__(self, network: nn.Cell, loss_fn: nn.Cell, n_inputs: int) -> None:
            super().__init__(auto_prefix=False)
            self.network = network
            self.loss_fn = loss_fn
            self.n_inputs = n_inputs

        def construct(self, *columns):
            outputs = self.network(*columns[:self.n_inputs])
            outputs = F.mixed_precision_cast(mstype.float32, outputs)
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            return self.loss_fn(*outputs, *columns[self.n_inputs:])

    class ScaledLoss(nn.Cell):
        """loss * factor, where factor = loss scale / grad_accum arrives as the last input (not differentiated)."""

        def __init__(self, loss_net: nn.Cell) -> None:
            super().__init__(auto_prefix=False)
            self.loss_net = loss_net

        def construct(self, *args):
            loss = self.loss_net(*args[:-1])
            return loss * args[-1], loss

    class TrainStepCell(nn.Cell):
        """One optimizer update over `grad_accum` micro-batches, with optional loss scaling, DP reduce and
        gradient clipping (after unscaling, as the model zoo's BERT and Transformer clip).
        Loss scaling is MindSpore's functional `ms.amp.StaticLossScaler`/`DynamicLossScaler` + `all_finite`,
        because the CPU backend refuses the loss-scale managers of `build_train_network`."""

        def __init__(self, loss_net: nn.Cell, optimizer: nn.Optimizer, *, micro_batch: int, grad_accum: int,
                     loss_scale: str, reducer: nn.Cell | None, grad_clip: str = "none") -> None:
            super().__init__(auto_prefix=False)
            self.loss_net = loss_net
            self.optimizer = optimizer
            self.weights = optimizer.parameters
            self.grad_fn = ms.value_and_grad(ScaledLoss(loss_net), None, self.weights, has_aux=True)
            self.micro_batch = micro_batch
            self.grad_accum = grad_accum
            self.dynamic = loss_scale == "dynamic"
            self.scaler = None
            if loss_scale == "static":
                self.scaler = ms.amp.StaticLossScaler(STATIC_LOSS_SCALE)
            elif self.dynamic:
                self.scaler = ms.amp.DynamicLossScaler(DYNAMIC_LOSS_SCALE, DYNAMIC_SCALE_FACTOR, DYNAMIC_SCALE_WINDOW)
            self.hyper_map = ops.HyperMap()
            self.reducer = reducer
            self.clip = grad_clip
            self.clip_one = nn.ClipByNorm() if grad_clip == "norm" else None     # built only where it runs
            self.clip_norm = ms.Tensor(GRAD_CLIP_NORM, mstype.float32)

        def construct(self, *columns):
            scale = ops.ones((), mstype.float32)
            if self.scaler is not None:
                scale = self.scaler.scale_value * 1.0
            factor = scale / self.grad_accum
            loss_sum = ops.zeros((), mstype.float32)
            grads = None
            for i in range(self.grad_accum):
                micro = columns
                if self.grad_accum > 1:
                    start = i * self.micro_batch
                    micro = tuple(c[start:start + self.micro_batch] for c in columns)
                if grads is not None:
                    # Without this edge MindSpore schedules every micro-batch's forward before any
                    # backward, keeping all their activations alive: accumulation would save no memory.
                    micro = tuple(ops.depend(c, grads) for c in micro)
                (_, loss), g = self.grad_fn(*micro, factor)
                loss_sum = loss_sum + F.cast(loss, mstype.float32)
                grads = g if grads is None else self.hyper_map(ops.add, grads, g)
            if self.reducer is not None:
                grads = self.reducer(grads)
            if self.scaler is not None:
                grads = self.scaler.unscale(grads)
            if self.clip == "norm":
                grads = tuple([self.clip_one(g, self.clip_norm) for g in grads])
            elif self.clip == "global_norm":
                grads = ops.clip_by_global_norm(grads, GRAD_CLIP_NORM)
            if self.dynamic:
                finite = ms.amp.all_finite(grads)
                self.scaler.adjust(finite)
                if finite:
                    self.optimizer(grads)
            else:
                self.optimizer(grads)
            return loss_sum / self.grad_accum

    return LossNet, TrainStepCell


def gradient_reducer(settings: Settings, weights: Any) -> "nn.Cell | None":
    """Data parallel: `nn.DistributedGradReducer` averages the gradients over the devices. Semi-auto/auto:
    MindSpore's parallel compiler inserts the reductions the shard plan needs, and a pipeline sums its
    micro-batches' gradients with `nn.PipelineGradReducer` (MindSpore's functional pipeline recipe)."""
    from mindspore import nn

    if settings.parallel_mode == "data":
        return nn.DistributedGradReducer(weights, mean=True, degree=settings.devices) if settings.devices > 1 else None
    if settings.pipeline_stages > 1:
        return nn.PipelineGradReducer(weights, opt_shard=settings.optimizer_shard)
    return None


@dataclass(frozen=True)
class TrainStep:
    """What `build_train_step` made. `cell(*columns)` runs one optimizer update and returns the mean loss."""

    cell: "nn.Cell"
    network: "nn.Cell"            # the (AMP-cast) network, for evaluation and graph extraction
    optimizer: "nn.Optimizer"
    micro_batch: int              # samples per device per micro-batch
    grad_accum: int
    devices: int                  # model replicas (settings.data_parallel): the cards that split the batch
    recomputed_blocks: int
    amp: str

    @property
    def step_batch(self) -> int:
        """Samples one call of `cell` takes on one device (all micro-batches stacked)."""
        return self.micro_batch * self.grad_accum

    @property
    def global_samples(self) -> int:
        return self.step_batch * self.devices


def build_train_step(workload: "Workload", preset: "Preset", settings: Settings,
                     total_steps: int | None = None) -> TrainStep:
    """Build the training step of a cell. `total_steps` sets the length of a decaying lr schedule
    (default: the preset's epochs over its training split)."""
    import mindspore as ms


    LossNet, TrainStepCell = _cells()
    ms.set_seed(settings.seed)
    network = apply_amp(workload.build_parallel_network(preset, settings), settings)
    recomputed = apply_recompute(workload, network, settings)
    inputs, _labels = workload.columns(preset)
    loss_net = LossNet(network, workload.build_loss(preset), len(inputs))
    if settings.pipeline_stages > 1:
        loss_net = ms.nn.PipelineCell(loss_net, settings.micro_batches)   # splits the batch into micro-batches
    if total_steps is None:
        total_steps = preset.epochs * steps_per_epoch(preset, settings)
    optimizer = make_optimizer(network.trainable_params(), settings, learning_rate(preset, settings, total_steps))
    micro = micro_batch_size(preset, settings)
    loaded_micro = plan_parallel(settings).loaded_batch(micro)     # what one rank's graph sees per micro-batch
    cell = TrainStepCell(loss_net, optimizer, micro_batch=loaded_micro, grad_accum=settings.grad_accum,
                         loss_scale=settings.loss_scale, reducer=gradient_reducer(settings, optimizer.parameters),
                         grad_clip=settings.grad_clip)
    cell.set_train(True)
    return TrainStep(cell=cell, network=network, optimizer=optimizer, micro_batch=micro,
                     grad_accum=settings.grad_accum, devices=settings.data_parallel, recomputed_blocks=recomputed,
                     amp=amp_effective(settings))


@dataclass(frozen=True)
class TrainResult:
    losses: list[float]          # one per optimizer update, in order
    network: "nn.Cell"
    steps: int
    samples_seen: int            # per device


def train(workload: "Workload", preset: "Preset", settings: Settings, epochs: int, *, rank: int = 0,
          world: int = 1, workdir: Path | None = None, step: TrainStep | None = None) -> TrainResult:
    """Train for `epochs` passes over the training split (the accuracy run). Same samples seen for any
    batch/grad_accum split, up to the remainder dropped by batching. `step`: an already built step in its
    initial state (workloads.reseed), else one is built."""
    if step is None:
        step = build_train_step(workload, preset, settings, total_steps=epochs * steps_per_epoch(preset, settings))
    data = workload.make_dataset(preset, "train", settings, step.step_batch, rank=rank, world=world, workdir=workdir)
    losses: list[float] = []
    for _ in range(epochs):
        for batch in data.create_tuple_iterator(num_epochs=1):
            losses.append(float(step.cell(*batch).asnumpy()))
    step.network.set_train(False)
    return TrainResult(losses=losses, network=step.network, steps=len(losses),
                       samples_seen=len(losses) * step.step_batch)
