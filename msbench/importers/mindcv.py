"""A mindcv training config (its YAML schema: configs/<family>/<model>_ascend.yaml, the flat keys of mindcv's
config.py) as a cell of the `mindcv:<model>` adapter (workloads/zoo/mindcv.py).

The adapter feeds mindcv's own network resnet50's generated images and loss, so the dataset and loss keys are
listed as not modelled with that reason; the image size, class count, label smoothing and the training
augmentations (RandAugment/AutoAugment, colour jitter, random erasing, interpolation, mixup/cutmix: mindcv's own
transforms then run, and their host cost is measured) are the adapter's preset fields; the rest are knobs.
"""

from __future__ import annotations

from typing import Any, Mapping

from msbench.errors import ConfigError
from msbench.importers.fields import ConfigFields, ImportedConfig, Knobs, flatten
from msbench.importers.zoo import zoo_config
from workloads.registry import get_workload
from workloads.zoo.mindcv import AUGMENT_FIELDS

FORMAT = "mindcv"
NUMERICS_ONLY = "numerics only: no effect on the step time or memory the device model predicts"
ADAPTER_DATA = ("the mindcv adapter feeds resnet50's generated images (docs/plugins.md): the source's reading, "
                "the crop's scale and ratio and the loss are resnet50's")
DEBUG = "process, logging or checkpoint setting: no effect on the modelled step"
MODES = {0: "graph", 1: "pynative"}
OPTIMIZERS = {"momentum": "momentum", "adam": "adam", "adamw": "adamw", "lamb": "lamb", "lars": "lars"}
SCHEDULES = {"cosine_decay": "cosine", "warmup_cosine_decay": "cosine", "step_decay": "step",
             "multi_step_decay": "step", "polynomial_decay": "poly", "constant": "constant"}
FIELDS_OF_PRESET = (("image_resize", "image_size"), ("num_classes", "num_classes"),
                    ("label_smoothing", "label_smoothing"), *((name, name) for name in AUGMENT_FIELDS))

REASONS: dict[str, str] = {
    **{k: ADAPTER_DATA for k in ("dataset", "data_dir", "shuffle", "dataset_download", "train_split", "val_split",
                                 "num_samples", "scale", "ratio", "hflip", "vflip", "crop_pct", "re_scale", "re_ratio",
                                 "re_max_attempts", "aug_splits", "loss")},
    "aug_repeats": "repeated augmentation: the sampler repeats each sample on several cards; the per-step work is "
                   "the same",
    **{k: DEBUG for k in ("pretrained", "ckpt_path", "keep_checkpoint_max", "ckpt_save_dir", "ckpt_save_interval",
                          "ckpt_save_policy", "epoch_size", "log_interval", "resume_opt", "val_while_train",
                          "val_interval", "metric_name", "train_url", "data_url", "ckpt_url", "enable_modelarts")},
    **{k: NUMERICS_ONLY for k in ("lr", "min_lr", "warmup_epochs", "warmup_factor", "decay_epochs", "decay_rate",
                                  "multi_step_decay_milestones", "lr_epoch_stair", "num_cycles", "cycle_decay",
                                  "momentum", "weight_decay", "filter_bias_and_bn", "use_nesterov", "eps",
                                  "drop_overflow_update", "clip_value", "drop_rate", "drop_path_rate",
                                  "ema_decay")},
    "distribute": "the card count is msrun's, not the config's: give it with --set devices=N",
    "val_amp_level": "evaluation: not part of a training step",
    "ema": "an exponential moving average of the weights: an extra pass over the parameters per step, not modelled",
}


def preset_value(name: str, value: Any) -> Any:
    """A config value in the adapter's preset terms (mindcv's None for no policy or jitter; one jitter factor)."""
    if name in ("label_smoothing", "re_prob", "mixup", "cutmix", "cutmix_prob"):
        return float(value)
    if name == "auto_augment":
        return value or ""
    if name == "re_value":
        return str(value)
    if name == "color_jitter":
        factors = value if isinstance(value, (list, tuple)) else [value or 0.0]
        if len(set(factors)) != 1 or len(factors) not in (1, 3):
            raise ConfigError("color_jitter", value, "one factor (or three equal ones) for brightness, contrast and "
                              "saturation: the adapter's preset has one")
        return float(factors[0])
    return value


def is_mindcv(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("model"), str) and any(k in data for k in ("opt", "scheduler", "dataset"))


def step_knobs(f: ConfigFields, where: str) -> dict[str, Any]:
    knobs = Knobs(f)
    if f.has("mode") and f.get("mode") not in MODES:
        raise ConfigError("mode", f.get("mode"), "0 (GRAPH_MODE) or 1 (PYNATIVE_MODE)", where)
    knobs.named("mode", MODES, "mode")
    knobs.copy_fields((("batch_size", "batch_size"), ("num_parallel_workers", "workers"),
                       ("drop_remainder", "drop_remainder"), ("dataset_sink_mode", "sink"), ("amp_level", "amp_level"),
                       ("gradient_accumulation_steps", "grad_accum"), ("seed", "seed")))
    knobs.named("opt", OPTIMIZERS, "optimizer")
    knobs.named("scheduler", SCHEDULES, "lr_schedule")
    kind, scale = str(f.get("loss_scale_type", "fixed")).lower(), f.get("loss_scale", 1.0)
    loss_scale = "dynamic" if kind in ("dynamic", "auto") else "static" if scale != 1 else "none"
    for key in ("loss_scale_type", "loss_scale"):
        if f.has(key):
            knobs.put(key, "loss_scale", loss_scale)
    if f.has("clip_grad"):      # mindcv clips with ops.clip_by_global_norm
        knobs.put("clip_grad", "grad_clip", "global_norm" if f.get("clip_grad") else "none")
    return dict(knobs)


def import_mindcv(data: Mapping[str, Any], file: str) -> ImportedConfig:
    f = ConfigFields(flatten(data))
    model = f.get("model")
    workload = get_workload(f"mindcv:{model}")       # an unknown model is refused there, with mindcv's names
    f.preset("model", "workload", workload.name)
    return zoo_config(f, workload, FIELDS_OF_PRESET, step_knobs(f, file), FORMAT, file, REASONS, f"mindcv's {model}",
                      preset_value)
