"""A toy workload for the MindSpore-target tests: an MLP with BatchNorm over a learnable synthetic rule.

Small enough to compile and train in a second, but it has everything the knobs touch: norm layers
(AMP keep_batchnorm_fp32), blocks to recompute, an eval metric with a chance level. Named by import
path (`toy_workload:ToyWorkload`) so the runner's child process can build it with `tests/hardware`
on PYTHONPATH.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.base import Preset, Workload
from workloads.pipeline import PipelineSpec, build_pipeline

TOY_NAME = "toy_workload:ToyWorkload"


@dataclass(frozen=True, kw_only=True)
class ToyPreset(Preset):
    features: int
    hidden: int
    depth: int
    classes: int
    batch_norm: bool      # without norm layers, grad_accum=k equals a k-times batch exactly


class ToySource:
    """Gaussian features; the label is the argmax of a fixed random linear map (so it is learnable)."""

    def __init__(self, preset: ToyPreset, split: str) -> None:
        n = preset.train_samples if split == "train" else preset.eval_samples
        rng = np.random.default_rng(0 if split == "train" else 1)
        self.x = rng.standard_normal((n, preset.features)).astype(np.float32)
        rule = np.random.default_rng(42).standard_normal((preset.features, preset.classes)).astype(np.float32)
        self.y = np.argmax(self.x @ rule, axis=1).astype(np.int32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int):
        return self.x[index], self.y[index]


class ToyWorkload(Workload):
    name = "toy-mlp"
    family = "toy"
    metric_name = "top1"
    preset_cls = ToyPreset
    presets_file = Path(__file__).with_name("toy_presets.toml")

    def build_network(self, preset):
        from mindspore import nn

        blocks, width = [], preset.features
        for _ in range(preset.depth):
            norm = [nn.BatchNorm1d(preset.hidden)] if preset.batch_norm else []
            blocks.append(nn.SequentialCell(nn.Dense(width, preset.hidden), *norm, nn.ReLU()))
            width = preset.hidden
        return nn.SequentialCell(*blocks, nn.Dense(width, preset.classes))

    def build_loss(self, preset):
        from mindspore import nn

        return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def columns(self, preset):
        return ["x"], ["y"]

    def synthetic_batch(self, preset, batch_size):
        src = ToySource(preset, "eval")
        return [np.resize(src.x, (batch_size, preset.features)), np.resize(src.y, (batch_size,))]

    def make_dataset(self, preset, split, settings, batch_size, rank=0, world=1, workdir=None):
        spec = PipelineSpec(source=ToySource(preset, split), columns=["x", "y"],
                            source_key=f"toy/{preset.features}/{preset.classes}/{split}", shuffle=split == "train")
        return build_pipeline(spec, settings, batch_size, rank=rank, world=world, workdir=workdir)

    def evaluate(self, network, preset):
        import mindspore as ms

        src = ToySource(preset, "eval")
        network.set_train(False)
        logits = network(ms.Tensor(src.x)).asnumpy()
        return {"top1": float(np.mean(np.argmax(logits, axis=1) == src.y))}

    def chance(self, preset):
        return 1.0 / preset.classes

    def recompute_blocks(self, network, full):
        blocks = list(network.cells())[:-1]
        return blocks if full else blocks[:1]
