"""Targets: where a cell runs. Names map lazily to classes so reading commands never import MindSpore.

A target name is data: `mindspore:<device>`, `model:<profile>` (a profile file), or a plugin name
(msbench.plugins: an installed entry point, or a `module:Class` allowed on the command line).
"""

from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable

from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.plugins import TARGET_GROUP, import_object, registered
from msbench.records import Record
from msbench.resources import suite_path

# "<kind>:<arg>" -> import path of a class constructed with the arg (e.g. model:ascend910b).
TARGET_KINDS: dict[str, str] = {
    "mindspore": "hardware.mindspore.target:MindSporeTarget",
    "model": "hardware.model.target:ModelTarget",
}
MINDSPORE_DEVICES = ("cpu", "ascend", "gpu")


@runtime_checkable
class Target(Protocol):
    """Runs a cell and returns its Record. `isolate` targets run each cell in a fresh subprocess.
    Optional `parallel_cells`: how many cells may run at once when `--jobs` is not given (default 1).
    Optional `python_bound`: True when an inline cell's work is Python that keeps a core busy (the device
    model), so a local run runs its cells in forked processes, not threads (msbench/executors/forked.py).
    Optional `prepare(cells, announce)`: work the cells share, done once before any of them runs, on the
    machine they run on (`announce(line)` tells the user what is being done)."""

    name: str
    isolate: bool

    def supports(self, cell: Cell) -> str | None:
        """None when the target can honour every knob of the cell, else the reason it cannot."""

    def run(self, cell: Cell) -> Record:
        """Run the cell (the runner has checked `supports`) and return its record."""


def profile_names() -> list[str]:
    return sorted(p.stem for p in suite_path("hardware/profiles").glob("*.toml"))


def check_target_name(name: object, where: str = "", plugins: Iterable[str] = ()) -> str:
    """Refuse a name that is not a known target, importing nothing; returns the name."""
    kind, sep, arg = name.partition(":") if isinstance(name, str) else ("", "", "")
    if kind == "mindspore" and sep and arg in MINDSPORE_DEVICES:
        return name  # type: ignore[return-value]
    if kind == "model" and sep and arg in profile_names():
        return name  # type: ignore[return-value]
    if isinstance(name, str) and name in registered(TARGET_GROUP, plugins):
        return name
    allowed = ", ".join([f"mindspore:{d}" for d in MINDSPORE_DEVICES] + [f"model:{p}" for p in profile_names()]
                        + sorted(registered(TARGET_GROUP, plugins)))
    raise ConfigError("target", name, allowed + " (other targets: an installed plugin or --allow-plugin module:Class)",
                      where)


def resolve_target(name: str, plugins: Iterable[str] = (), **options: object) -> Target:
    """The Target for a checked name; options go to the constructor (e.g. `accuracy=True`)."""
    plugins = tuple(plugins)
    check_target_name(name, plugins=plugins)
    kind, _, arg = name.partition(":")
    if kind in TARGET_KINDS and name not in registered(TARGET_GROUP, plugins):
        return import_object(TARGET_KINDS[kind])(arg, **options)  # type: ignore[operator]
    return plugin_target(name, registered(TARGET_GROUP, plugins)[name], options)


def plugin_target(name: str, spec: str, options: dict[str, object]) -> Target:
    """A plugin's target, or one line saying that `spec` (an entry point, an --allow-plugin) is no target class."""
    cls = import_object(spec)
    try:
        target = cls(**options)  # type: ignore[operator]
    except TypeError as err:
        why = f"{type(err).__name__}: {err}"
    else:
        if isinstance(target, Target):
            return target
        why = f"it made a {type(target).__name__}, which has no name, isolate, supports() and run()"
    raise ConfigError("target", name, f"a target class ({spec} is not one: {why})")
