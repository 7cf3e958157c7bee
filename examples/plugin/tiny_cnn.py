"""A workload plugin in a few dozen lines (the tutorial of docs/plugins.md): a small CNN, its presets, generated
images, a loss and a top-1 metric. msbench finds it as `tiny_cnn:TinyCNNWorkload` (with this folder on
PYTHONPATH and `--allow-plugin tiny_cnn:TinyCNNWorkload`) or through an entry point of a package."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.base import Preset, Workload
from workloads.classification import chance_top1
from workloads.registry import get_workload


@dataclass(frozen=True, kw_only=True)
class TinyCNNPreset(Preset):
    width: int            # channels of the first conv; the second has twice as many
    image_size: int
    num_classes: int


class TinyCNNWorkload(Workload):
    name = "tiny-cnn"                  # the table name in tiny_cnn.toml
    family = "example"
    metric_name = "top1"
    preset_cls = TinyCNNPreset
    presets_file = Path(__file__).with_name("tiny_cnn.toml")

    def build_network(self, preset):
        from mindspore import nn

        w = preset.width
        return nn.SequentialCell(
            nn.Conv2d(3, w, 3), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(w, 2 * w, 3), nn.BatchNorm2d(2 * w), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dense(2 * w, preset.num_classes))

    def build_loss(self, preset):
        from mindspore import nn

        return nn.CrossEntropyLoss()

    def columns(self, preset):
        return ["image"], ["label"]

    def synthetic_batch(self, preset, batch_size):
        return [np.zeros((batch_size, 3, preset.image_size, preset.image_size), np.float32),
                np.arange(batch_size, dtype=np.int32) % preset.num_classes]

    # Generated data: resnet50's synthetic JPEGs and pipeline at this preset's size, so the device model
    # reads resnet50's calibrated host cost (a pipeline of one's own is measured with `msbench calibrate`).
    def data(self, preset):
        return "resnet50", preset.name, {"image_size": preset.image_size, "num_classes": preset.num_classes}

    def calibrated_pipeline(self, preset, overrides):
        workload, name, fields = self.data(self.preset(preset, overrides))
        base = get_workload(workload).preset(name)
        return workload, name, {k: v for k, v in fields.items() if getattr(base, k) != v}

    def make_dataset(self, preset, split, settings, batch_size, rank=0, world=1, workdir=None):
        workload, name, fields = self.data(preset)
        resnet = get_workload(workload)
        return resnet.make_dataset(resnet.preset(name, fields), split, settings, batch_size, rank, world, workdir)

    def evaluate(self, network, preset):
        workload, name, fields = self.data(preset)
        resnet = get_workload(workload)
        return resnet.evaluate(network, resnet.preset(name, fields))

    def chance(self, preset):
        return chance_top1(preset.num_classes)
