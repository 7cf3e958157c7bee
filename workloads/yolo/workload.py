"""The YOLO workloads (yolov5s, yolov8n, yolov8s) on one base: presets, shapes data, losses, COCO mAP."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from msbench.cache import content_key
from msbench.errors import ConfigError
from msbench.settings import Settings
from workloads.base import Preset, Workload
from workloads.classification import eval_batch_size
from workloads.pipeline import MapStage, PipelineSpec, build_pipeline
from workloads.yolo import data
from workloads.yolo.augment import AUGMENTS, YoloTransform
from workloads.yolo.metrics import coco_map
from workloads.yolo.postprocess import decode_v5, decode_v8, detections

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn
    from mindspore.dataset import Dataset

    from workloads.yolo.network import YoloArch

SPLITS = ("train", "eval")
MOSAIC_PARTS = 4


@dataclass(frozen=True, kw_only=True)
class YoloPreset(Preset):
    image_size: int          # square network input (a multiple of 32)
    stored_width: int        # size of the stored JPEG scenes the pipeline decodes
    stored_height: int
    num_classes: int
    depth: float             # depth multiple of the repeats (0.33 for n/s)
    width: float             # width multiple of the channels (0.25 n, 0.50 s)
    max_channels: int        # channel cap before the width multiple (1024 for n/s)
    max_boxes: int           # ground-truth rows per image after padding (static shapes)
    max_objects: int         # most shapes drawn in one generated scene
    object_min: float        # object size range, as a fraction of the scene's short side
    object_max: float
    augment: str             # "mosaic" (mosaic + affine + HSV + flip) | "light" (letterbox + flip)

    def __post_init__(self) -> None:
        where = f"yolo.{self.name}"
        if self.image_size < 32 or self.image_size % 32:
            raise ConfigError("image_size", self.image_size, "a multiple of 32 (the largest stride)", where)
        for name in ("stored_width", "stored_height", "num_classes", "max_channels", "max_boxes",
                     "max_objects", "batch_size", "train_samples", "eval_samples", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "integer >= 1", where)
        for name in ("depth", "width", "lr"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, getattr(self, name), "> 0", where)
        if not 0 < self.object_min <= self.object_max <= 1:
            raise ConfigError("object_min", (self.object_min, self.object_max), "0 < object_min <= object_max <= 1", where)
        if self.augment not in AUGMENTS:
            raise ConfigError("augment", self.augment, "|".join(AUGMENTS), where)


# Each network's YOLO version and the NMS IoU of its val.py (the rest of a network is its presets).
NETWORKS: dict[str, tuple[str, float]] = {"yolov5s": ("v5", 0.6), "yolov8n": ("v8", 0.7), "yolov8s": ("v8", 0.7)}


class YoloWorkload(Workload):
    """Shared by the three networks, each this class named (NETWORKS: its version and NMS IoU)."""

    family: ClassVar[str] = "yolo"
    metric_name: ClassVar[str] = "map50"
    preset_cls: ClassVar[type[Preset]] = YoloPreset
    presets_file: ClassVar[Path] = Path(__file__).with_name("presets.toml")
    version: str
    nms_iou: float
    # The three networks feed one pipeline (pipeline_spec, make_dataset, the host-cost probe's batch read these
    # fields; depth, width, max_channels, lr and epochs size or train the network only): yolov8n's entries.
    data_workload: ClassVar[str | None] = "yolov8n"
    pipeline_fields: ClassVar[tuple[str, ...]] = (
        "image_size", "stored_width", "stored_height", "num_classes", "max_boxes", "max_objects", "object_min",
        "object_max", "augment", "batch_size", "train_samples")

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        if name is not None:
            self.version, self.nms_iou = NETWORKS[name]

    def arch(self, preset: YoloPreset) -> "YoloArch":
        # imports MindSpore: only when a network is built
        from workloads.yolo.network import YoloArch

        return YoloArch(self.version, preset.depth, preset.width, preset.num_classes, preset.image_size,
                        preset.max_channels)

    def build_network(self, preset: YoloPreset) -> "nn.Cell":  # type: ignore[override]
        # imports MindSpore: only when a network is built
        from workloads.yolo.network import YoloNet

        return YoloNet(self.arch(preset))

    def build_loss(self, preset: YoloPreset) -> "nn.Cell":  # type: ignore[override]
        if self.version == "v5":
            # imports MindSpore: only when a loss is built
            from workloads.yolo.loss_v5 import YOLOv5Loss

            return YOLOv5Loss(preset.num_classes, preset.image_size)
        # imports MindSpore: only when a loss is built
        from workloads.yolo.loss_v8 import YOLOv8Loss

        return YOLOv8Loss(preset.num_classes, preset.image_size)

    def columns(self, preset: Preset) -> tuple[list[str], list[str]]:
        return ["image"], ["labels"]

    def synthetic_batch(self, preset: YoloPreset, batch_size: int) -> list[np.ndarray]:  # type: ignore[override]
        """Noise images and one centred box per image of a cycling class (the loss sees real positives;
        identical images would make BatchNorm's batch variance zero and a step blow up)."""
        labels = np.zeros((batch_size, preset.max_boxes, 6), np.float32)
        labels[:, 0] = [1.0, 0.0, 0.5, 0.5, 0.25, 0.25]
        labels[:, 0, 1] = np.arange(batch_size) % preset.num_classes
        images = np.random.default_rng(0).random((batch_size, 3, preset.image_size, preset.image_size), np.float32)
        return [images, labels]

    def pipeline_spec(self, preset: YoloPreset, split: str, seed: int = 1) -> PipelineSpec:
        """Stored scenes (grouped four at a time for mosaic), then decode and augment in one Python map."""
        if split not in SPLITS:
            raise ConfigError("split", split, "|".join(SPLITS), self.name)
        count = preset.train_samples if split == "train" else preset.eval_samples
        scenes = data.ShapesSource(split, count, preset.num_classes, preset.stored_width, preset.stored_height,
                                   preset.max_objects, (preset.object_min, preset.object_max))
        group = MOSAIC_PARTS if split == "train" and preset.augment == "mosaic" else 1
        source = data.MosaicSource(scenes, group)
        stored = [name for i in range(group) for name in (f"jpeg{i}", f"boxes{i}")] + ["index"]
        mode = "eval" if split == "eval" else preset.augment
        transform = YoloTransform(mode, preset.image_size, preset.max_boxes, seed)
        key = content_key("yolo-shapes", data.DATA_VERSION, split, count, group, preset.num_classes,
                          preset.stored_width, preset.stored_height, preset.max_objects,
                          preset.object_min, preset.object_max)
        return PipelineSpec(source=source, columns=stored, source_key=key,
                            stages=[MapStage([transform], stored, ["image", "labels"])],
                            shuffle=split == "train", project=["image", "labels"])

    def make_dataset(self, preset: YoloPreset, split: str, settings: "Settings", batch_size: int,  # type: ignore[override]
                     rank: int = 0, world: int = 1, workdir: Path | None = None) -> "Dataset":
        return build_pipeline(self.pipeline_spec(preset, split, settings.seed), settings, batch_size,
                              rank=rank, world=world, workdir=workdir)

    def predict(self, network: "nn.Cell", preset: YoloPreset, images: np.ndarray) -> list[np.ndarray]:
        """Per image (n, 6) [x1, y1, x2, y2, score, class] in input pixels, after NMS."""
        from mindspore import Tensor


        maps = [m.asnumpy().astype(np.float32) for m in network(Tensor(images))]
        if self.version == "v5":
            boxes, scores = decode_v5(maps, preset.num_classes)
        else:
            boxes, scores = decode_v8(maps, preset.num_classes, self.arch(preset).reg_max)
        return [detections(b, s, iou=self.nms_iou) for b, s in zip(boxes, scores)]

    def evaluate(self, network: "nn.Cell", preset: YoloPreset) -> dict[str, float]:  # type: ignore[override]
        batch = eval_batch_size(preset.eval_samples, preset.batch_size)
        dataset = self.make_dataset(preset, "eval", Settings(), batch)
        was_training = network.training
        network.set_train(False)
        truths, preds = [], []
        try:
            for images, labels in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
                preds.extend(self.predict(network, preset, images))
                truths.extend(labels_to_boxes(lab, preset.image_size) for lab in labels)
        finally:
            network.set_train(was_training)
        return coco_map(truths, preds, preset.num_classes)

    def chance(self, preset: YoloPreset) -> float:  # type: ignore[override]
        """Guessed boxes score ~0 mAP: untrained tiny nets measured mAP@0.5 0.0014 (v5s) and 0.0 (v8n, v8s)."""
        return 0.0


def labels_to_boxes(labels: np.ndarray, size: int) -> np.ndarray:
    """Padded label rows (M, 6) -> valid boxes (n, 5) [class, x1, y1, x2, y2] in pixels."""
    rows = labels[labels[:, 0] > 0.5]
    xy, wh = rows[:, 2:4] * size, rows[:, 4:6] * size
    return np.c_[rows[:, 1], xy - wh / 2, xy + wh / 2]
