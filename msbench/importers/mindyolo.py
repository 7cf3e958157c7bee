"""A mindyolo training config (configs/yolov8/yolov8{n,s,m,l,x}.yaml with its `__BASE__` files: the network's
scale multiples, `per_batch_size`, `img_size`, the `ms_*` context keys, `optimizer`, `data`) as a cell of the
`mindyolo:<config>` adapter (workloads/zoo/mindyolo.py).

The adapter builds mindyolo's YOLOv8 layer table (workloads/zoo/mindyolo.toml) at the scale the config's
multiples name, fed msbench's YOLOv8 data, augmentations and loss, so the layer table, transforms and loss
gains are listed as not modelled with that reason.
"""

from __future__ import annotations

from typing import Any, Mapping

from msbench.errors import ConfigError
from msbench.importers.fields import ConfigFields, ImportedConfig, Knobs, flatten
from msbench.importers.zoo import zoo_config
from workloads.registry import get_workload

FORMAT = "mindyolo"
FAMILY = "yolov8"
SCALE_KEYS = ("depth_multiple", "width_multiple", "max_channels")
NUMERICS_ONLY = "numerics only: no effect on the step time or memory the device model predicts"
ADAPTER_DATA = ("the mindyolo adapter feeds msbench's YOLOv8 data, augmentations and loss (docs/plugins.md), "
                "whose calibrated host cost stands in for this one")
EVAL = "evaluation and NMS settings: not part of a training step"
MODES = {0: "graph", 1: "pynative"}
OPTIMIZERS = {"momentum": "momentum", "sgd": "momentum", "adam": "adam", "adamw": "adamw"}
LOSS_SCALERS = {"static": "static", "dynamic": "dynamic", "none": "none"}

REASONS: dict[str, str] = {
    "network.backbone": "the adapter builds mindyolo's YOLOv8 layer table (workloads/zoo/mindyolo.toml) at the "
                        "scale the multiples name; a custom table is not read",
    "network.head": "the adapter builds mindyolo's YOLOv8 layer table (workloads/zoo/mindyolo.toml) at the "
                    "scale the multiples name; a custom table is not read",
    "network.reg_max": "the layer table's own (16)",
    "network.stride": "the layer table's own (8, 16, 32)",
    "data": ADAPTER_DATA,
    "loss": ADAPTER_DATA,
    "optimizer": NUMERICS_ONLY,
    "epochs": "epochs: one step is predicted",
    "sync_bn": "SyncBatchNorm's cross-card statistics are not modelled (BatchNorm per card)",
    "opencv_threads_num": "OpenCV's threads in the host pipeline: not a knob",
    "ms_loss_scaler_value": NUMERICS_ONLY,
    "is_parallel": "the card count is msrun's, not the config's: give it with --set devices=N",
    **{k: EVAL for k in ("iou_thres", "conf_thres", "conf_free", "nms_time_limit", "per_class_map",
                         "rect", "single_cls")},
    **{k: "process, logging or checkpoint setting: no effect on the modelled step"
       for k in ("weight", "strict_load", "save_dir", "log_level", "keep_checkpoint_max", "log_interval",
                 "ckpt_save_policy", "ckpt_max_keep", "save_interval", "run_eval", "run_eval_interval",
                 "device_target", "ema", "overflow_still_update", "seed", "resume")},
}


def is_mindyolo(data: Mapping[str, Any]) -> bool:
    network = data.get("network")
    return isinstance(network, Mapping) and "model_name" in network


def scale_name(f: ConfigFields, where: str) -> str:
    """The adapter config whose multiples the network's are (mindyolo.toml's yolov8 scales)."""
    # mindyolo's tables: only for a mindyolo config
    from workloads.zoo.mindyolo import config_tables

    if f.get("network.model_name") != FAMILY:
        raise ConfigError("network.model_name", f.get("network.model_name"), f"{FAMILY} (the mindyolo adapter's "
                          "family)", where)
    f.preset("network.model_name", "family", FAMILY)
    scales = config_tables()["scales"]
    given = {k: f.get(f"network.{k}") for k in SCALE_KEYS}
    for name, scale in scales.items():
        if all(given[k] == scale[k] for k in SCALE_KEYS):
            for k in SCALE_KEYS:
                f.preset(f"network.{k}", "workload", f"mindyolo:{name}")
            return name
    raise ConfigError("network." + " / ".join(SCALE_KEYS), tuple(given.values()), "the multiples of "
                      + ", ".join(f"{n} {tuple(s[k] for k in SCALE_KEYS)}" for n, s in scales.items()), where)


def step_knobs(f: ConfigFields, where: str) -> dict[str, Any]:
    knobs = Knobs(f)
    if f.has("ms_mode") and f.get("ms_mode") not in MODES:
        raise ConfigError("ms_mode", f.get("ms_mode"), "0 (GRAPH_MODE) or 1 (PYNATIVE_MODE)", where)
    knobs.named("ms_mode", MODES, "mode")
    knobs.copy_fields((("per_batch_size", "batch_size"), ("ms_amp_level", "amp_level"), ("ms_datasink", "sink"),
                       ("ms_enable_graph_kernel", "graph_kernel"), ("accumulate", "grad_accum"),
                       ("data.num_parallel_workers", "workers")))
    knobs.named("ms_loss_scaler", LOSS_SCALERS, "loss_scale")
    if f.has("clip_grad"):
        knobs.put("clip_grad", "grad_clip", "global_norm" if f.get("clip_grad") else "none")
    knobs.named("optimizer.optimizer", OPTIMIZERS, "optimizer")
    return dict(knobs)


def import_mindyolo(data: Mapping[str, Any], file: str) -> ImportedConfig:
    f = ConfigFields(flatten(data))
    workload = get_workload(f"mindyolo:{scale_name(f, file)}")
    return zoo_config(f, workload, (("img_size", "image_size"), ("network.nc", "num_classes")), step_knobs(f, file),
                      FORMAT, file, REASONS, f"mindyolo's {workload.name.partition(':')[2]}")
