"""Workload names -> workloads: built-in names, model-zoo adapters and plugins, imported only when built.

Four kinds of name, tried in this order:
- a built-in name (`resnet50`): the fixed table below;
- a zoo name `<zoo>:<model>` (`mindcv:convnext_tiny`): an adapter of workloads/zoo/ over an installed
  model-zoo package (ZOOS); the zoo prefix is reserved, so `mindcv:x` is never read as `module:Class`;
- an installed entry point of the `msbench.workloads` group (`name = "package.module:Class"`);
- `package.module:Class`, a class honouring the `Workload` contract.

Trust is decided where a name enters (a matrix file, the command line): `check_workload` refuses a
`module:Class` name that `--allow-plugin` did not allow, without importing anything, as for targets
(msbench/plugins.py). Past that gate a cell's workload name is trusted, so `get_workload` resolves it
in any process: the isolated worker and the extraction child get only the name.
"""

from __future__ import annotations

import inspect
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

from msbench.errors import ConfigError
from msbench.plugins import SPEC, import_object, installed, registered
from msbench.resources import suite_path
from workloads.base import Workload

WORKLOAD_GROUP = "msbench.workloads"
WORKLOADS_DIR = suite_path("workloads")
# Modules of workloads/ that every training step uses: editing one changes every workload's cache keys.
SHARED_SOURCES = tuple(WORKLOADS_DIR / name for name in ("train_step.py", "base.py", "pipeline.py"))
MAX_CALIBRATION_HOPS = 4          # zoo adapter -> built-in workload -> the family's data workload, with room

WORKLOADS: dict[str, str] = {
    "resnet50": "workloads.resnet50.workload:ResNet50Workload",
    "yolov5s": "workloads.yolo.workload:YoloWorkload",
    "yolov8n": "workloads.yolo.workload:YoloWorkload",
    "yolov8s": "workloads.yolo.workload:YoloWorkload",
    "transformer-base": "workloads.transformer.workload:EncoderDecoderWorkload",
    "transformer-large": "workloads.transformer.workload:EncoderDecoderWorkload",
    "bert-base": "workloads.transformer.workload:BertWorkload",
    "bert-large": "workloads.transformer.workload:BertWorkload",
    "gpt2-small": "workloads.transformer.workload:GPT2Workload",
    "llama2-7b": "workloads.transformer.workload:LLMWorkload",
    "llama2-13b": "workloads.transformer.workload:LLMWorkload",
    "llama2-70b": "workloads.transformer.workload:LLMWorkload",
    "gpt3-175b": "workloads.transformer.workload:LLMWorkload",
    "llm": "workloads.transformer.workload:AnyLLMWorkload",       # any decoder-only shape: overrides (--config)
}

# zoo prefix -> (adapter factory `module:function(model) -> Workload`, the package it adapts)
ZOOS: dict[str, tuple[str, str]] = {
    "mindcv": ("workloads.zoo.mindcv:mindcv_workload", "mindcv"),
    "mindyolo": ("workloads.zoo.mindyolo:mindyolo_workload", "mindyolo"),
}

ALLOWED_NAMES = ("a built-in name, <zoo>:<model> (zoos: " + ", ".join(ZOOS) + "), a `msbench.workloads` "
                 "entry point, or module.path:Class allowed with --allow-plugin")


def zoo_of(name: str) -> str | None:
    """The zoo prefix of `mindcv:resnet50`, else None."""
    prefix, sep, model = name.partition(":")
    return prefix if sep and model and prefix in ZOOS else None


def is_plugin_spec(name: str) -> bool:
    return zoo_of(name) is None and SPEC.fullmatch(name) is not None


def workload_origin(name: str) -> str:
    """Where a name comes from, in words (for `msbench list workloads` and error messages)."""
    if name in WORKLOADS:
        return "built-in"
    zoo = zoo_of(name)
    if zoo:
        return f"zoo adapter over {ZOOS[zoo][1]} {package_version(ZOOS[zoo][1]) or '(not installed)'}"
    entry_points = dict(installed(WORKLOAD_GROUP))
    if name in entry_points:
        return f"entry point {WORKLOAD_GROUP} -> {entry_points[name]}"
    return "--allow-plugin"


def check_workload(name: object, allowed: Iterable[str] = (), where: str = "") -> str:
    """The gate where a name enters: refuse an unknown or untrusted name by itself, importing nothing."""
    if isinstance(name, str) and (name in WORKLOADS or zoo_of(name) or name in dict(installed(WORKLOAD_GROUP))):
        return name
    if isinstance(name, str) and is_plugin_spec(name):
        if name in registered(WORKLOAD_GROUP, allowed):
            return name
        raise ConfigError("workload", name, f"{ALLOWED_NAMES} (this one is not allowed: add --allow-plugin {name})",
                          where)
    raise ConfigError("workload", name, f"{', '.join(WORKLOADS)}; or {ALLOWED_NAMES}", where)


@cache
def get_workload(name: str) -> Workload:
    """The workload a (trusted) name stands for; one instance per name and process."""
    if name in WORKLOADS:
        return import_object(WORKLOADS[name])(name)  # type: ignore[operator]  (a family's class, named)
    zoo = zoo_of(name)
    if zoo:
        return import_object(ZOOS[zoo][0])(name.partition(":")[2])  # type: ignore[operator]
    spec = dict(installed(WORKLOAD_GROUP)).get(name, name)
    if not is_plugin_spec(spec):
        raise ConfigError("workload", name, f"{', '.join(WORKLOADS)}; or {ALLOWED_NAMES}")
    cls = import_object(spec)
    if not (isinstance(cls, type) and issubclass(cls, Workload)) or inspect.isabstract(cls):
        raise ConfigError("workload", name, "a concrete subclass of workloads.base.Workload")
    return cls()   # its class's `name` names its presets tables; cells carry the name given here


def calibration_entry(workload: str, preset: str, overrides: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(workload, preset, overrides) of the host-cost entry that measured this cell's pipeline, following each
    workload's `calibrated_pipeline` until one names itself (a zoo adapter feeds a built-in workload that may
    in turn read another's entry)."""
    entry = (workload, preset, dict(overrides))
    for _ in range(MAX_CALIBRATION_HOPS):
        following = get_workload(entry[0]).calibrated_pipeline(entry[1], entry[2])
        if following == entry:
            return entry
        entry = following
    raise ConfigError("calibrated_pipeline", workload, f"a chain of at most {MAX_CALIBRATION_HOPS} workloads "
                      "ending in one that reads its own entry")


def workload_sources(name: str) -> list[Path]:
    """What a workload's graphs, rows and records depend on: its own sources (a built-in family's package;
    a plugin's `source_files()`) plus the shared step builder, base and pipeline."""
    if name in WORKLOADS:
        package = suite_path("/".join(WORKLOADS[name].split(":")[0].split(".")[:2]))
        own = [package if package.is_dir() else package.with_suffix(".py")]
    else:
        own = list(get_workload(name).source_files())
    return [*own, *SHARED_SOURCES]


def package_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def plugin_names() -> list[str]:
    """Names that `msbench list workloads` shows beside the built-ins: installed entry points."""
    return [name for name, _ in installed(WORKLOAD_GROUP)]
