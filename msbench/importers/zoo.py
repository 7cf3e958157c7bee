"""What the mindcv and mindyolo importers share: a zoo adapter's full preset with the config's preset fields
as overrides (only those that differ), its knobs settled against the capability table, and the account."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from msbench.importers.fields import ConfigFields, ImportedConfig
from msbench.importers.settle import settle
from msbench.settings import DEFAULTS


def zoo_config(f: ConfigFields, workload: Any, preset_fields: tuple[tuple[str, str], ...], knobs: Mapping[str, Any],
               fmt: str, file: str, reasons: Mapping[str, str], label: str,
               convert: Callable[[str, Any], Any] = lambda name, value: value) -> ImportedConfig:
    """The cell of `workload` (a zoo adapter) at its full preset: each (config path, preset field) the config
    has is recorded, and an override where it differs from the preset's."""
    base = workload.preset("full")
    overrides: dict[str, Any] = {}
    for path, name in preset_fields:
        if f.has(path):
            value = convert(name, f.get(path))
            f.preset(path, name, value)
            if getattr(base, name) != value:
                overrides[name] = value
    workload.preset("full", overrides)                  # the preset's own checks, naming the field
    settled = {k: v for k, v in settle(f, knobs, file).items() if v != DEFAULTS[k]}
    shape = f"{label} at its full preset" + (
        " with " + ", ".join(f"{k}={v}" for k, v in overrides.items()) if overrides else "")
    return ImportedConfig(file=file, format=fmt, workload=workload.name, preset="full", overrides=overrides,
                          knobs=settled, fields=f.account(reasons), shape_note=shape)
