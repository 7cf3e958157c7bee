"""`mindyolo:<config>`: a mindyolo YOLOv8 network as a workload, fed and trained like msbench's yolov8.

The network is mindyolo's own (`mindyolo.models.create_model` over its layer table), untouched: the point
of a peer network is that msbench's extraction, lowering and memory model were not written with it in
mind. Its training-mode output is the same as msbench's YOLOv8 head (per level a (B, 4*reg_max + nc, H, W)
map, box bins first), so data, augmentations, loss, NMS and mAP are the built-in YOLOv8 ones
(workloads/yolo/), and a mindyolo cell and a yolov8 cell differ only in the network.

mindyolo 0.5.0 ships no config files, and `import mindyolo` needs OpenCV, which it does not declare:
the layer tables are data in mindyolo.toml, and the `zoo` extra pins opencv-python-headless.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msbench.errors import ConfigError, UserError
from workloads.base import Preset, make_preset
from workloads.yolo.workload import YoloPreset, YoloWorkload
from workloads.registry import get_workload

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from mindspore import nn

PACKAGE = "mindyolo"
PINS = ("mindyolo==0.5.0", "opencv-python-headless==4.11.0.86")
INSTALL = f"pip install 'msbench[zoo]' (or: pip install {' '.join(PINS)})"
CONFIGS_FILE = Path(__file__).with_name("mindyolo.toml")
FAMILY = "yolov8"                                   # the mindyolo model family the tables describe
NETWORK_FIELDS = ("depth", "width", "max_channels")  # what `presets` replaces in the data workload's presets
# mindyolo block classes -> the recompute unit msbench's own YOLO marks on its counterpart
# (workloads/yolo/layers.py): C2f blocks are what selective recompute replays; full adds the convs.
RECOMPUTE_UNITS = {"C2f": "selective", "ConvNormAct": "full", "SPPF": "full"}


def check_installed() -> None:
    """One line saying how to install what is missing, found without importing mindyolo (which imports
    MindSpore): names reach the parent process, which must stay free of it."""
    for package, role in ((PACKAGE, "the mindyolo package"), ("cv2", "OpenCV, which mindyolo imports undeclared")):
        if importlib.util.find_spec(package) is None:
            raise UserError(f"the mindyolo:<config> workloads need {role}, which is not installed; {INSTALL}")


def require_mindyolo() -> Any:
    """The mindyolo package, or one line saying how to install it or why it does not import."""
    check_installed()
    try:
        return importlib.import_module(PACKAGE)
    except ImportError as err:       # 0.5.0 imports cv2 without declaring it
        raise UserError(f"mindyolo is installed but `import mindyolo` fails ({type(err).__name__}: {err}); "
                        f"{INSTALL}; check with: python -c 'import mindyolo'") from None


@functools.cache
def config_tables() -> dict[str, Any]:
    with open(CONFIGS_FILE, "rb") as fh:
        return tomllib.load(fh)[FAMILY]


def scale_of(config: str) -> dict[str, Any]:
    """The scale table of a config name; an unknown name is refused here, before mindyolo is imported."""
    scales = config_tables()["scales"]
    if config not in scales:
        raise ConfigError("mindyolo config", config, f"one of {', '.join(scales)} (the {FAMILY} configs of "
                          f"mindyolo 0.5.0 written in {CONFIGS_FILE.name})")
    return scales[config]


def data_workload(config: str) -> YoloWorkload:

    return get_workload(scale_of(config)["data"])  # type: ignore[return-value]


class MindYOLOWorkload(YoloWorkload):
    family = "mindyolo"
    presets_file = CONFIGS_FILE
    version = "v8"
    nms_iou = 0.7                   # mindyolo yolov8-base.yaml `iou_thres`, as msbench's yolov8

    def __init__(self, config: str) -> None:
        self.config = config
        self.name = f"mindyolo:{config}"
        scale_of(config)
        check_installed()              # refuse a missing package here, not in the extraction child

    def presets(self) -> dict[str, Preset]:
        """The data workload's presets with this config's depth, width and channel cap (tiny: `tiny_width`)."""
        scale = scale_of(self.config)
        out: dict[str, Preset] = {}
        for name, base in data_workload(self.config).presets().items():
            width = scale["width_multiple"] if name == "full" else scale["tiny_width"]
            values = {**dataclasses.asdict(base), "depth": scale["depth_multiple"], "width": width,
                      "max_channels": scale["max_channels"]}
            out[name] = make_preset(YoloPreset, values, f"{CONFIGS_FILE.name}:{self.config} ({name})")
        return out

    def source_files(self) -> list[Path]:
        """This adapter and its tables, msbench's YOLO package (data, loss, metric) and mindyolo's model
        sources (found without importing mindyolo, whose import needs OpenCV)."""
        spec = importlib.util.find_spec(PACKAGE)
        models = [Path(spec.origin).parent / "models"] if spec and spec.origin else []
        yolo = Path(importlib.util.find_spec("workloads.yolo").origin).parent  # type: ignore[union-attr,arg-type]
        return [Path(__file__).resolve(), CONFIGS_FILE, yolo, *models]

    def network_config(self, preset: YoloPreset) -> dict[str, Any]:
        """mindyolo's `network` config (its yaml's dict) at this preset's classes and multiples."""
        return {**config_tables()["network"], "nc": preset.num_classes, "depth_multiple": preset.depth,
                "width_multiple": preset.width, "max_channels": preset.max_channels}

    def build_network(self, preset: YoloPreset) -> "nn.Cell":  # type: ignore[override]
        require_mindyolo()
        from mindyolo.models import create_model
        from mindyolo.utils.config import Config

        network = create_model(model_name=FAMILY, model_cfg=Config(self.network_config(preset)),
                               num_classes=preset.num_classes)
        for _, cell in network.cells_and_names():
            unit = RECOMPUTE_UNITS.get(type(cell).__name__)
            if unit:
                cell.recompute_unit = unit      # workloads.base.marked_blocks reads it
        return network

    def predict(self, network: "nn.Cell", preset: YoloPreset, images: "np.ndarray") -> list["np.ndarray"]:
        """As yolov8's, on the raw level maps: mindyolo's head in inference mode returns (decoded, maps)."""
        return super().predict(lambda batch: network(batch)[1], preset, images)  # type: ignore[arg-type]


def mindyolo_workload(config: str) -> MindYOLOWorkload:
    return MindYOLOWorkload(config)
