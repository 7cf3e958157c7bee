"""The Workload contract: a real MindSpore network, its presets, data, loss and quality metric.

Framework-free on import: MindSpore is imported inside the methods that build things, so that
matrix expansion, reports and `msbench list` never pay for it.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from msbench.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from mindspore import nn
    from mindspore.dataset import Dataset

    from msbench.settings import Settings


@dataclass(frozen=True, kw_only=True)
class Preset:
    """Fields every preset has; each family subclasses it with its sizes (width, depth, resolution...)."""

    name: str
    batch_size: int          # per-device batch when the `batch_size` knob is unset
    train_samples: int       # samples in one epoch of the generated training split
    eval_samples: int        # samples in the generated evaluation split
    epochs: int              # epochs of the accuracy run (tiny preset)
    lr: float                # base learning rate at batch_size


def load_presets(path: Path, workload: str, preset_cls: type[Preset]) -> dict[str, Preset]:
    """Read `[<workload>.<preset>]` tables from a family's presets.toml (presets are data). Parsed once
    per version of the file: every prediction reads its cell's preset several times."""
    stat = path.stat()
    return dict(parsed_presets(path, stat.st_mtime_ns, stat.st_size, workload, preset_cls))


@functools.lru_cache(maxsize=256)
def parsed_presets(path: Path, mtime_ns: int, size: int, workload: str,
                   preset_cls: type[Preset]) -> dict[str, Preset]:
    with open(path, "rb") as fh:
        tables = tomllib.load(fh).get(workload, {})
    return {name: make_preset(preset_cls, {"name": name, **values}, f"{path.name}:{workload}.{name}")
            for name, values in tables.items()}


@functools.cache
def preset_fields(preset_cls: type[Preset]) -> dict[str, Any]:
    """A preset class's fields and their types (resolving the annotations is the slow part of a preset)."""
    return typing.get_type_hints(preset_cls)


def make_preset(preset_cls: type[Preset], values: Mapping[str, Any], where: str) -> Preset:
    known = preset_fields(preset_cls)
    values = dict(values)
    for key, value in values.items():
        if key not in known:
            raise ConfigError("preset field", key, ", ".join(k for k in known if k != "name"), where)
        expected = known[key]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            values[key] = float(value)
        elif isinstance(expected, type) and (not isinstance(value, expected) or isinstance(value, bool) != (expected is bool)):
            raise ConfigError(key, value, expected.__name__, where)
    optional = {f.name for f in dataclasses.fields(preset_cls) if f.default is not dataclasses.MISSING}
    missing = sorted(set(known) - set(values) - optional)
    if missing:
        raise ConfigError("preset field", missing[0], "required", where)
    return preset_cls(**values)


RECOMPUTE_UNIT = "recompute_unit"   # block attribute: "selective" (recomputed by both modes) or "full" (full only)


def marked_blocks(network: "nn.Cell", full: bool) -> "list[nn.Cell]":
    """Blocks carrying RECOMPUTE_UNIT, outermost first: `selective` units, plus `full` ones when `full`.

    A marker attribute, not isinstance, because AMP O1 rewrites cells into new classes; a block nested
    inside a chosen one is skipped, since recomputing the outer block already covers it."""
    units = ("selective", "full") if full else ("selective",)
    chosen: list = []
    prefixes: list[str] = []
    for name, cell in network.cells_and_names():
        if getattr(cell, RECOMPUTE_UNIT, None) in units and not any(name.startswith(p) for p in prefixes):
            chosen.append(cell)
            prefixes.append(name + ".")
    return chosen


# LLM knobs a network without a parallel plan refuses, with the value it must keep.
PLAN_KNOBS = (("tensor_parallel", 1), ("pipeline_stages", 1), ("flash_attention", False),
              ("parallel_mode", "data"))


def refuse_llm_parallelism(workload: str, settings: "Settings") -> None:
    for knob, plain in PLAN_KNOBS:
        if getattr(settings, knob) != plain:
            raise ConfigError(knob, getattr(settings, knob), f"{str(plain).lower()} for {workload}",
                              rule=f"{workload} has no parallel plan (no shard strategies, pipeline stages or "
                                   "fused attention); only the decoder-only LLM stack (llama2-*, gpt3-175b) has one")


def trainable_parameters(network: Any) -> int:
    """Trainable parameter elements of a built network (BatchNorm moving statistics are not, like torch's
    buffers): what the workload table and the published counts it is checked against count."""
    return sum(int(p.size) for p in network.trainable_params())


class Workload(ABC):
    """One network of a family. A family's class sets the class variables and implements the builders; each
    network of a built-in family is that class named (its presets are tables of the family's presets file:
    data, not a subclass per network). A plugin's class sets `name` itself."""

    name: str
    family: ClassVar[str]                # "resnet" | "yolo" | "transformer"
    metric_name: ClassVar[str]           # headline key of evaluate(), a number in [0, 1]
    preset_cls: ClassVar[type[Preset]]
    presets_file: ClassVar[Path]
    # Preset fields that count identical blocks of a stack (the device model extracts a shallow copy
    # and extends it: hardware/model/scaling.py). Only where every block is the same network.
    identical_blocks: ClassVar[tuple[str, ...]] = ()
    # Networks of a family that feed one data pipeline name the network of their family (the class that sets
    # this, named) whose host-cost entries measure it, and the preset fields that pipeline reads (the rest
    # size or train the network only). A workload fed by another class's pipeline overrides
    # `calibrated_pipeline`.
    data_workload: ClassVar[str | None] = None
    pipeline_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name

    def presets(self) -> dict[str, Preset]:
        return load_presets(self.presets_file, self.name, self.preset_cls)

    def preset(self, name: str = "tiny", overrides: Mapping[str, Any] | None = None) -> Preset:
        """The named preset with matrix overrides applied (e.g. `seq_len=512`, `image_size=320`)."""
        presets = self.presets()
        if name not in presets:
            raise ConfigError("preset", name, "|".join(presets), self.name)
        base = presets[name]
        if not overrides:
            return base
        return make_preset(self.preset_cls, {**dataclasses.asdict(base), **overrides}, f"{self.name}.{name} overrides")

    @abstractmethod
    def build_network(self, preset: Preset) -> "nn.Cell":
        """The model; `construct(*inputs)` takes the input columns of a batch."""

    @abstractmethod
    def build_loss(self, preset: Preset) -> "nn.Cell":
        """The training loss; `construct(*network_outputs, *label_columns)` returns a scalar."""

    @abstractmethod
    def columns(self, preset: Preset) -> tuple[list[str], list[str]]:
        """(input columns, label columns) of a batch, in the order the network and loss take them."""

    @abstractmethod
    def synthetic_batch(self, preset: Preset, batch_size: int) -> "Sequence[np.ndarray]":
        """One batch of the right shapes and dtypes (inputs then labels), for compile-only graph extraction."""

    @abstractmethod
    def make_dataset(self, preset: Preset, split: str, settings: "Settings", batch_size: int,
                     rank: int = 0, world: int = 1, workdir: Path | None = None) -> "Dataset":
        """The real mindspore.dataset pipeline (`split` is "train" or "eval"), batched with drop_remainder."""

    @abstractmethod
    def evaluate(self, network: "nn.Cell", preset: Preset) -> dict[str, float]:
        """Quality on the eval split; the key `metric_name` holds the headline number in [0, 1]."""

    @abstractmethod
    def chance(self, preset: Preset) -> float:
        """The headline metric of an untrained model (the level the tiny preset must clearly beat)."""

    def source_files(self) -> "list[Path]":
        """Files whose edits change this workload's graphs and numbers (cache keys, fingerprints). Default:
        the module defining the class and its presets file; an adapter adds the package it wraps."""
        import inspect

        return [Path(inspect.getfile(type(self))).resolve(), Path(self.presets_file)]

    def calibrated_pipeline(self, preset: str, overrides: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """(workload, preset, overrides) of the host-cost calibration entry that measured this cell's data
        pipeline: its own, unless the workload feeds exactly another workload's pipeline (a zoo adapter, or
        `data_workload` at the pipeline fields where this preset differs from that workload's). One pipeline
        has one entry: separate measurements of the YOLO pipeline differed by 15%, and so did predictions."""
        if self.data_workload is None:
            return self.name, preset, dict(overrides)
        # A network of the family: the class that names `data_workload` builds it (an adapter subclass may not).
        family = next(cls for cls in type(self).__mro__ if "data_workload" in vars(cls))
        source = family(self.data_workload)
        if preset not in source.presets():
            return self.name, preset, dict(overrides)
        own, base = self.preset(preset, overrides), source.preset(preset, {})
        return self.data_workload, preset, {f: getattr(own, f) for f in self.pipeline_fields
                                            if getattr(own, f) != getattr(base, f)}

    def size_from_config(self, preset: Preset) -> tuple[int, int] | None:
        """(trainable parameters, forward FLOPs per sample) computed from the preset, for networks too large
        to build on this host (LLMs: a 7B network is 27 GB of fp32 weights); None = build and count."""
        return None

    def build_parallel_network(self, preset: Preset, settings: "Settings") -> "nn.Cell":
        """The network as the settings' parallel plan lays it out; without a plan, `build_network`'s."""
        return self.build_network(preset)

    def check_settings(self, preset: Preset, settings: "Settings") -> None:
        """Refuse (ConfigError) knob values this network cannot honour at this preset. Only the decoder-only
        LLM stack has a parallel plan (sharded matmuls, layers to stage, an attention to fuse); every other
        network refuses tensor/pipeline parallelism and flash attention rather than run them as no-ops."""
        refuse_llm_parallelism(self.name, settings)

    def recompute_blocks(self, network: "nn.Cell", full: bool) -> "list[nn.Cell]":
        """Blocks to recompute: those the network marks with RECOMPUTE_UNIT (see `marked_blocks`)."""
        return marked_blocks(network, full)
