"""The ResNet-50 workload: network, presets, JPEG image pipeline, cross-entropy loss and top-1 accuracy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from msbench.cache import content_key
from msbench.errors import ConfigError
from msbench.settings import Settings
from workloads.base import Preset, Workload
from workloads.classification import chance_top1, eval_batch_size, top1_accuracy
from workloads.pipeline import MapStage, PipelineSpec, build_pipeline
from workloads.resnet50 import data

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn
    from mindspore.dataset import Dataset


AUGMENTS = ("imagenet", "light")
SPLITS = ("train", "eval")


@dataclass(frozen=True, kw_only=True)
class ResNetPreset(Preset):
    image_size: int          # square network input resolution
    stored_width: int        # resolution of the stored JPEGs the pipeline decodes
    stored_height: int
    num_classes: int
    width: int               # channels of the stem (64 in ResNet-50); stage s has width * 2**s
    blocks: tuple[int, ...]  # bottlenecks per stage ((3, 4, 6, 3) in ResNet-50)
    augment: str             # "imagenet" (random-resized crop + flip) | "light" (resize + flip)
    label_smoothing: float

    def __post_init__(self) -> None:
        where = f"resnet50.{self.name}"
        blocks = self.blocks
        if not (isinstance(blocks, (list, tuple)) and blocks
                and all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in blocks)):
            raise ConfigError("blocks", blocks, "a non-empty list of integers >= 1 (bottlenecks per stage)", where)
        object.__setattr__(self, "blocks", tuple(blocks))   # TOML gives a list; keep the preset hashable
        for name in ("image_size", "stored_width", "stored_height", "width", "batch_size",
                     "train_samples", "eval_samples", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "integer >= 1", where)
        if self.num_classes < 2:
            raise ConfigError("num_classes", self.num_classes, "integer >= 2", where)
        if self.augment not in AUGMENTS:
            raise ConfigError("augment", self.augment, "|".join(AUGMENTS), where)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError("label_smoothing", self.label_smoothing, "0 <= x < 1", where)
        if self.lr <= 0:
            raise ConfigError("lr", self.lr, "> 0", where)


class ResNet50Workload(Workload):
    name = "resnet50"
    family: ClassVar[str] = "resnet"
    metric_name: ClassVar[str] = "top1"
    preset_cls: ClassVar[type[Preset]] = ResNetPreset
    presets_file: ClassVar[Path] = Path(__file__).with_name("presets.toml")

    def build_network(self, preset: ResNetPreset) -> "nn.Cell":  # type: ignore[override]
        # imports MindSpore: only when a network is built
        from workloads.resnet50.network import ResNet

        return ResNet(preset.num_classes, preset.width, preset.blocks)

    def build_loss(self, preset: ResNetPreset) -> "nn.Cell":  # type: ignore[override]
        from mindspore import nn

        return nn.CrossEntropyLoss(label_smoothing=preset.label_smoothing)

    def columns(self, preset: Preset) -> tuple[list[str], list[str]]:
        return ["image"], ["label"]

    def synthetic_batch(self, preset: ResNetPreset, batch_size: int) -> list[np.ndarray]:  # type: ignore[override]
        return [np.zeros((batch_size, 3, preset.image_size, preset.image_size), np.float32),
                np.arange(batch_size, dtype=np.int32) % preset.num_classes]

    def pipeline_spec(self, preset: ResNetPreset, split: str) -> PipelineSpec:
        """Source, transforms and shuffling of one split (eval: no augmentation, fixed order)."""
        if split not in SPLITS:
            raise ConfigError("split", split, "|".join(SPLITS), self.name)
        count = preset.train_samples if split == "train" else preset.eval_samples
        source = data.JpegImageSource(split, count, preset.num_classes, preset.stored_width, preset.stored_height)
        transforms = (data.train_transforms if split == "train" else data.eval_transforms)(preset.image_size, preset.augment)
        key = content_key("resnet-jpeg", data.DATA_VERSION, split, count, preset.num_classes,
                          preset.stored_width, preset.stored_height)
        return PipelineSpec(source=source, columns=["image", "label"], source_key=key,
                            stages=[MapStage(transforms, ["image"])], shuffle=split == "train")

    def make_dataset(self, preset: ResNetPreset, split: str, settings: "Settings", batch_size: int,  # type: ignore[override]
                     rank: int = 0, world: int = 1, workdir: Path | None = None) -> "Dataset":
        return build_pipeline(self.pipeline_spec(preset, split), settings, batch_size,
                              rank=rank, world=world, workdir=workdir)

    def evaluate(self, network: "nn.Cell", preset: ResNetPreset) -> dict[str, float]:  # type: ignore[override]
        batch = eval_batch_size(preset.eval_samples, preset.batch_size)
        dataset = self.make_dataset(preset, "eval", Settings(), batch)
        return {self.metric_name: top1_accuracy(network, dataset)}

    def chance(self, preset: ResNetPreset) -> float:  # type: ignore[override]
        return chance_top1(preset.num_classes)
