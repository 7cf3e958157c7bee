"""Targets: where a cell runs. Names map lazily to classes so reading commands never import MindSpore."""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from msbench.cell import Cell
from msbench.errors import UserError
from msbench.records import Record

# "<kind>:<arg>" -> import path of a class constructed with the arg (e.g. model:ascend910b).
TARGET_KINDS: dict[str, str] = {
    "mindspore": "hardware.mindspore.target:MindSporeTarget",
    "model": "hardware.model.target:ModelTarget",
}
MINDSPORE_DEVICES = ("cpu", "ascend", "gpu")


@runtime_checkable
class Target(Protocol):
    """Runs a cell and returns its Record. `isolate` targets run each cell in a fresh subprocess.
    Optional `parallel_cells`: how many cells may run at once when `--jobs` is not given (default 1)."""

    name: str
    isolate: bool

    def supports(self, cell: Cell) -> str | None:
        """None when the target can honour every knob of the cell, else the reason it cannot."""

    def run(self, cell: Cell) -> Record:
        """Run the cell (the runner has checked `supports`) and return its record."""


def import_object(path: str) -> object:
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise UserError(f"cannot import {path!r}: {err}") from None


def resolve_target(name: str, **options: object) -> Target:
    """`mindspore:cpu`, `model:<profile>`, or `package.module:Class[=arg]`; options go to the constructor
    (e.g. `accuracy=True`)."""
    kind, sep, arg = name.partition(":")
    if kind in TARGET_KINDS and sep:
        cls = import_object(TARGET_KINDS[kind])
        return cls(arg, **options)  # type: ignore[operator]
    if sep and kind.replace(".", "").replace("_", "").isalnum():
        attr, _, extra = arg.partition("=")
        cls = import_object(f"{kind}:{attr}")
        return cls(extra, **options) if extra else cls(**options)  # type: ignore[operator]
    allowed = ", ".join([f"mindspore:{d}" for d in MINDSPORE_DEVICES] + ["model:<profile>", "package.module:Class"])
    raise UserError(f"target={name!r} is not known; allowed: {allowed}")
