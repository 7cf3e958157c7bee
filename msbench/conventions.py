"""The mapping conventions: how a published run's or a training config's own terms (its MindSpore release,
its dataset class) become msbench knobs.

One module, read by the published validation cases (`hardware/validation/cases.py`) and by config import
(`msbench/importers`), so that a run is never mapped two ways. A case or a config states the source's own
term (`reader = "ImageFolderDataset"`, `mindspore = "1.3.0"`); the knob follows from here, with its reason.
`python -m msbench.docs_gen` writes them to docs/generated/conventions.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from msbench.errors import ConfigError


@dataclass(frozen=True)
class Reader:
    """Dataset classes that read their data alike, and the msbench source that stands for them."""

    names: tuple[str, ...]        # as the source's script names the class
    data_format: str              # the `data_format` knob
    why: str


READERS: tuple[Reader, ...] = (
    Reader(("MindDataset",), "mindrecord", "MindSpore's MindRecord reader: files read and parsed in C++"),
    Reader(("TFRecordDataset",), "mindrecord",
           "TFRecord files read and parsed in C++; msbench's C++ reader is MindRecord"),
    Reader(("ImageFolderDataset", "ImageFolderDatasetV2"), "mindrecord",
           "JPEG files read and decoded in C++; msbench has no image-folder source, MindRecord is its C++ reader"),
    Reader(("Cifar10Dataset",), "mindrecord", "CIFAR-10's binary files read in C++"),
    Reader(("GeneratorDataset",), "generator",
           "samples made by Python code (mindyolo's COCODataset, a user's generator), one call per sample"),
)

PYTHON_SOURCE = "generator"       # what a loader class msbench does not list is read as (config import)

GE_ERA_LAST_MAJOR = 1
GE_ERA_JIT_LEVEL = "O2"
GE_ERA_WHY = ("MindSpore 0.x and 1.x compiled every Ascend graph with the CANN GraphEngine and sank it whole "
              "(task sink): the only graph path of those releases, which MindSpore 2.x names jit_level O2 "
              "(mindspore.JitConfig: O2 runs GE, whole-graph sink); the kernel-by-kernel O0 runtime came with 2.x")


def reader_table() -> dict[str, Reader]:
    return {name.lower(): r for r in READERS for name in r.names}


def data_format_of(reader: str, where: str, field: str = "reader") -> str:
    """The `data_format` a listed dataset class stands for; any other class is refused in one line."""
    known = reader_table().get(str(reader).lower())
    if known is None:
        raise ConfigError(field, reader, ", ".join(n for r in READERS for n in r.names), where)
    return known.data_format


def data_format_or_python(reader: str) -> str:
    """As `data_format_of`, but a class msbench does not list (a config's own loader) is read as a Python
    source, the slower assumption, rather than refused."""
    known = reader_table().get(str(reader).lower())
    return known.data_format if known else PYTHON_SOURCE


def release_major(mindspore: str) -> int | None:
    """The major version of a release as a source writes it ("0.5.0-beta", "1.5", "2.4 (MindFormers ...)")."""
    found = re.match(r"\s*(\d+)\.", mindspore)
    return int(found.group(1)) if found else None


def graph_jit_level(mindspore: str) -> str | None:
    """The jit level a graph-mode run of this release ran at on Ascend, where the release fixes it (0.x and
    1.x: GE whole-graph sink, `GE_ERA_WHY`); None for 2.x, whose default depends on the release and chip, so
    a case states the level its source states, or keeps msbench's default and lists that as assumed."""
    major = release_major(mindspore)
    return GE_ERA_JIT_LEVEL if major is not None and major <= GE_ERA_LAST_MAJOR else None


def conventions_markdown() -> str:
    """The conventions as the docs page shows them."""
    rows = [f"| {', '.join(f'`{n}`' for n in r.names)} | `data_format = \"{r.data_format}\"` | {r.why} |"
            for r in READERS]
    return "\n".join([
        "## Dataset classes", "",
        "A published case's `reader` and a MindFormers config's `train_dataset.data_loader.type` name the class; "
        "the knob follows. A config's loader class that is not listed is read as a Python source "
        f"(`data_format = \"{PYTHON_SOURCE}\"`); a published case's is refused.", "",
        "| dataset class | knob | why |", "|---|---|---|", *rows, "",
        "## The release's graph path", "",
        f"A graph-mode case of MindSpore {GE_ERA_LAST_MAJOR}.x or older runs at `jit_level = \"{GE_ERA_JIT_LEVEL}\"`: "
        f"{GE_ERA_WHY}. A 2.x case states the level its source states, or keeps msbench's default and lists "
        "that under `assumed`.", ""])
