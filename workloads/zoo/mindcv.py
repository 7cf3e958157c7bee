"""`mindcv:<model>`: any mindcv classification model as a workload, fed like resnet50.

The network is mindcv's own (`mindcv.create_model`), untouched: the point of a peer network is that
msbench's extraction, lowering and memory model were not written with it in mind. Data, loss and schedule
are resnet50's (its generated ImageNet-like JPEGs; the loss also takes the auxiliary logits some networks
return while training, as mindcv's does). The training augmentations are a recipe's: with none set, the
pipeline is resnet50's (mindcv's `transforms_imagenet_train` without extras is the same C++ ops), so the host
cost is resnet50's calibrated entry at the same image size; with a recipe's RandAugment/AutoAugment, colour
jitter, random erasing, bicubic resizing or mixup/cutmix (its YAML's names, `AUGMENT_FIELDS`), the train split
runs mindcv's own `create_transforms` and `Mixup`, as its `create_loader` maps them, and its host cost is an
entry of its own, measured once for every network (`calibrated_pipeline`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

import numpy as np

from msbench.errors import ConfigError, UserError
from workloads.base import Preset, Workload, make_preset
from workloads.classification import chance_top1
from workloads.registry import get_workload

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn
    from mindspore.dataset import Dataset

    from msbench.settings import Settings
    from workloads.pipeline import PipelineSpec
    from workloads.resnet50.workload import ResNetPreset

PACKAGE = "mindcv"
PIN = "mindcv==0.3.0"
INSTALL = f"pip install 'msbench[zoo]' (or: pip install {PIN})"
PRESETS_FILE = Path(__file__).with_name("mindcv.toml")
DEFAULT_INPUT_SIZE = 224        # mindcv's `_cfg` default input size, for models whose config names none
DATA_FIELDS = ("image_size", "num_classes", "train_samples", "eval_samples")   # what resnet50's pipeline reads
# A recipe's training augmentations, named as mindcv's YAMLs and config.py name them; at their defaults (mindcv's
# config.py defaults, but interpolation and no extras) the train pipeline is resnet50's.
AUGMENT_FIELDS = ("interpolation", "auto_augment", "color_jitter", "re_prob", "re_value", "mixup", "cutmix",
                  "cutmix_prob")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest", "area")      # mindspore.dataset.vision.Inter, as mindcv reads it
AUTO_AUGMENTS = ("randaug", "autoaug", "3a", "trivialaugwide", "augmix")   # policy prefixes transforms_factory knows
RE_VALUES = ("0", "random")                                      # random erasing's fill: zeros, or normal noise
CANONICAL = "mindcv:resnet50"    # names the one host-cost entry of an augmented recipe, whatever the network


@dataclass(frozen=True, kw_only=True)
class MindCVPreset(Preset):
    data: str                # the resnet50 preset whose images, pipeline, loss and schedule this one takes
    image_size: int          # square network input resolution
    num_classes: int
    label_smoothing: float
    interpolation: str = "bilinear"      # of the random-resized crop (and RandAugment's geometric ops)
    auto_augment: str = ""               # mindcv policy string, e.g. "randaug-m9-mstd0.5-inc1"; "" none
    color_jitter: float = 0.0            # brightness/contrast/saturation jitter, used when auto_augment is ""
    re_prob: float = 0.0                 # random erasing probability
    re_value: str = "0"
    mixup: float = 0.0                   # mixup alpha (a Python map over each batch; labels become soft)
    cutmix: float = 0.0                  # cutmix alpha
    cutmix_prob: float = 1.0             # probability that a batch is mixed at all (mindcv's config default)

    def __post_init__(self) -> None:
        where = f"mindcv.{self.name}"
        for name in ("image_size", "batch_size", "train_samples", "eval_samples", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "integer >= 1", where)
        if self.num_classes < 2:
            raise ConfigError("num_classes", self.num_classes, "integer >= 2", where)
        if self.interpolation not in INTERPOLATIONS:
            raise ConfigError("interpolation", self.interpolation, "|".join(INTERPOLATIONS), where)
        if self.auto_augment and not self.auto_augment.startswith(AUTO_AUGMENTS):
            raise ConfigError("auto_augment", self.auto_augment,
                              f"\"\" or a mindcv policy starting with {'|'.join(AUTO_AUGMENTS)}", where)
        if self.re_value not in RE_VALUES:
            raise ConfigError("re_value", self.re_value, "|".join(RE_VALUES), where)
        for name in ("color_jitter", "re_prob", "cutmix_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(name, getattr(self, name), "0 <= x <= 1", where)
        for name in ("mixup", "cutmix"):
            if getattr(self, name) < 0.0:
                raise ConfigError(name, getattr(self, name), ">= 0", where)
        if self.mixes and self.batch_size % 2:
            raise ConfigError("batch_size", self.batch_size, "an even number: mindcv's Mixup pairs the "
                              "samples of a batch", where)

    @property
    def mixes(self) -> bool:
        """Whether mindcv's loader maps Mixup over each batch (it does whenever mixup + cutmix > 0)."""
        return self.mixup + self.cutmix > 0.0

    def augments(self) -> dict[str, Any]:
        """The recipe augmentations that differ from resnet50's pipeline (empty: it is resnet50's)."""
        defaults = {f.name: f.default for f in dataclasses.fields(MindCVPreset) if f.name in AUGMENT_FIELDS}
        if self.auto_augment:         # mindcv's transforms_imagenet_train jitters colour only without a policy
            defaults.pop("color_jitter")
        return {name: getattr(self, name) for name in defaults if getattr(self, name) != defaults[name]}


def require_mindcv() -> Any:
    """The mindcv package, or one line saying how to install it."""
    if importlib.util.find_spec(PACKAGE) is None:
        raise UserError(f"the mindcv:<model> workloads need the mindcv package, which is not installed; {INSTALL}")
    import mindcv

    return mindcv


@functools.cache
def model_facts(model: str) -> tuple[int, str]:
    """(default input size, mindcv module) of a mindcv model; an unknown name is refused here."""
    require_mindcv()
    from mindcv.models import registry

    if not registry.is_model(model):
        raise ConfigError("mindcv model", model, "a name of mindcv.models.list_models() (e.g. resnet50, "
                          "mobilenet_v3_large_100, vit_b_32_224, convnext_tiny)")
    size = registry.get_pretrained_cfg(model).get("input_size", (3, DEFAULT_INPUT_SIZE, DEFAULT_INPUT_SIZE))
    return int(size[-1]), registry.model_entrypoint(model).__module__.rpartition(".")[2]


@functools.cache
def unsupported() -> dict[str, str]:
    """Models the adapter refuses, each with why (mindcv.toml's [unsupported], found by the zoo walk:
    hardware/model/zoo_walk.py)."""
    with open(PRESETS_FILE, "rb") as fh:
        return dict(tomllib.load(fh).get("unsupported", {}))


def offered_models() -> list[str]:
    """Every model of mindcv's registry, sorted: the adapter accepts each but `unsupported()`."""
    require_mindcv()
    from mindcv.models import list_models

    return sorted(list_models())


def module_of(model: str) -> str:
    """The mindcv module (architecture family) that defines `model`, e.g. `convnext`."""
    return model_facts(model)[1]


def resnet50() -> Workload:

    return get_workload("resnet50")


class MindCVWorkload(Workload):
    family: ClassVar[str] = "mindcv"
    metric_name: ClassVar[str] = "top1"
    preset_cls: ClassVar[type[Preset]] = MindCVPreset
    presets_file: ClassVar[Path] = PRESETS_FILE

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = f"mindcv:{model}"
        model_facts(model)                        # refuse an unknown model (or a missing package) now
        if (reason := unsupported().get(model)) is not None:
            raise ConfigError("mindcv model", model, "a mindcv model msbench can extract (not "
                              f"{', '.join(sorted(unsupported()))})", rule=reason)

    def presets(self) -> dict[str, Preset]:
        """resnet50's presets with this model's input size and the fields of mindcv.toml."""
        with open(PRESETS_FILE, "rb") as fh:
            table = tomllib.load(fh)
        default_size, module = model_facts(self.model)
        fixed = module in table["fixed_resolution"]["modules"]
        out: dict[str, Preset] = {}
        for name in ("full", "tiny"):
            own = dict(table[name])
            base = resnet50().presets()[own["data"]]
            values = {f.name: getattr(base, f.name) for f in dataclasses.fields(MindCVPreset) if hasattr(base, f.name)}
            values.update(own)
            if name == "full" or fixed:
                values["image_size"] = default_size
            out[name] = make_preset(MindCVPreset, {**values, "name": name}, f"{PRESETS_FILE.name}:{name} ({self.name})")
        return out

    def source_files(self) -> list[Path]:
        """This adapter and its presets, plus mindcv's model sources (found without importing mindcv)."""
        spec = importlib.util.find_spec(PACKAGE)
        models = [Path(spec.origin).parent / "models"] if spec and spec.origin else []
        return [Path(__file__).resolve(), PRESETS_FILE, *models]

    def data_preset(self, preset: MindCVPreset) -> "ResNetPreset":
        """The resnet50 preset that generates and transforms exactly this preset's images."""
        base = resnet50().presets()[preset.data]
        return resnet50().preset(preset.data, self.data_overrides(preset, base))  # type: ignore[return-value]

    @staticmethod
    def data_overrides(preset: MindCVPreset, base: Any) -> dict[str, Any]:
        return {f: getattr(preset, f) for f in DATA_FIELDS if getattr(preset, f) != getattr(base, f)}

    def calibrated_pipeline(self, preset: str, overrides: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """resnet50's calibration entry at this preset's data fields when the recipe adds no augmentation (the
        pipeline is the same one); else the one entry of mindcv's pipeline at those fields and augmentations."""
        p: MindCVPreset = self.preset(preset, overrides)  # type: ignore[assignment]
        data = self.data_overrides(p, resnet50().presets()[p.data])
        if not p.augments():
            return "resnet50", p.data, data
        return CANONICAL, preset, {**data, **p.augments()}

    def build_network(self, preset: MindCVPreset) -> "nn.Cell":  # type: ignore[override]
        mindcv = require_mindcv()
        return mindcv.create_model(self.model, num_classes=preset.num_classes, pretrained=False)

    def build_loss(self, preset: MindCVPreset) -> "nn.Cell":  # type: ignore[override]
        return with_aux_logits(resnet50().build_loss(self.data_preset(preset)))

    def columns(self, preset: Preset) -> tuple[list[str], list[str]]:
        return ["image"], ["label"]

    def synthetic_batch(self, preset: MindCVPreset, batch_size: int) -> list[np.ndarray]:  # type: ignore[override]
        images, labels = resnet50().synthetic_batch(self.data_preset(preset), batch_size)
        if preset.mixes:                      # Mixup's soft one-hot labels, as the loss then takes them
            labels = np.eye(preset.num_classes, dtype=np.float32)[labels]
        return [images, labels]

    def pipeline_spec(self, preset: MindCVPreset, split: str) -> "PipelineSpec":
        """resnet50's source and split; the train split's maps are the recipe's when it augments."""
        spec = resnet50().pipeline_spec(self.data_preset(preset), split)  # type: ignore[attr-defined]
        if split != "train" or not preset.augments():
            return spec
        from workloads.pipeline import MapStage

        per_batch = mixing(preset) if preset.mixes else None
        return dataclasses.replace(spec, stages=[MapStage(train_transforms(preset), ["image"])], per_batch=per_batch)

    def make_dataset(self, preset: MindCVPreset, split: str, settings: "Settings", batch_size: int,  # type: ignore[override]
                     rank: int = 0, world: int = 1, workdir: Path | None = None) -> "Dataset":
        from workloads.pipeline import build_pipeline

        return build_pipeline(self.pipeline_spec(preset, split), settings, batch_size,
                              rank=rank, world=world, workdir=workdir)

    def evaluate(self, network: "nn.Cell", preset: MindCVPreset) -> dict[str, float]:  # type: ignore[override]
        return resnet50().evaluate(network, self.data_preset(preset))

    def chance(self, preset: MindCVPreset) -> float:  # type: ignore[override]
        return chance_top1(preset.num_classes)


def train_transforms(preset: MindCVPreset) -> list:
    """mindcv's train transforms at the recipe's augmentations (RandomCropDecodeResize, flip, the policy or
    colour jitter, Normalize, HWC2CHW, RandomErasing), as its train.py asks create_transforms for them."""
    from mindcv.data import create_transforms

    return create_transforms("imagenet", image_resize=preset.image_size, is_training=True,
                             auto_augment=preset.auto_augment or None, interpolation=preset.interpolation,
                             color_jitter=preset.color_jitter or None, re_prob=preset.re_prob,
                             re_value=0 if preset.re_value == "0" else preset.re_value)


def mixing(preset: MindCVPreset) -> Any:
    """mindcv's Mixup over a batch, as its create_loader maps it (label smoothing left to the loss), as the
    batch's per_batch_map: the batch's images and labels in, the mixed images and soft labels out."""
    from mindcv.data.mixup import Mixup

    mix = Mixup(mixup_alpha=preset.mixup, cutmix_alpha=preset.cutmix, cutmix_minmax=None, prob=preset.cutmix_prob,
                switch_prob=0.5, label_smoothing=0.0, num_classes=preset.num_classes)

    def mixed(images: list, labels: list, _info: Any) -> tuple:
        return mix(np.stack(images), np.asarray(labels))

    return mixed


# The weight of each auxiliary head's loss, for networks that return (logits, aux logits) while training: mindcv's
# recipes for them set aux_factor 0.1 (configs/inceptionv3/inception_v3_ascend.yaml), as its CrossEntropySmooth reads it.
AUX_FACTOR = 0.1


def with_aux_logits(loss: "nn.Cell") -> "nn.Cell":
    """`loss` for a network that may return auxiliary logits (Inception V3 in training): the main logits' loss
    plus AUX_FACTOR times each auxiliary head's, as mindcv trains it; a single logits tensor is passed through."""
    from mindspore import nn

    class AuxLogitsLoss(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.loss = loss

        def construct(self, *outputs_and_labels: Any) -> Any:    # the step passes a network's outputs spread out
            labels = outputs_and_labels[-1]
            total = self.loss(outputs_and_labels[0], labels)
            for aux in outputs_and_labels[1:-1]:
                total = total + AUX_FACTOR * self.loss(aux, labels)
            return total

    return AuxLogitsLoss()


def mindcv_workload(model: str) -> MindCVWorkload:
    return MindCVWorkload(model)
