"""What an imported config became, field by field: a knob, a preset field, or "not modelled" with the reason.

`ConfigFields` walks a parsed config as dotted paths; an importer claims the paths it maps, and every path it
did not claim is listed as not modelled with the reason its format's table gives (or, for a key that table
does not know, that msbench does not read it), so no field of a user's config is dropped without a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

KNOB, PRESET, NOT_MODELLED = "knob", "preset", "not modelled"
UNKNOWN = "a key msbench's mapping does not know: not read"


@dataclass(frozen=True)
class FieldUse:
    """One config field: `use` is knob | preset | not modelled; `to` the knob or preset assignment, or the reason."""

    path: str
    value: Any
    use: str
    to: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "value": self.value, "use": self.use, "to": self.to}


@dataclass(frozen=True)
class ImportedConfig:
    """A config file as a cell's parts: workload, preset, preset overrides, knobs; and the account of every field."""

    file: str
    format: str                    # mindformers | mindcv | mindyolo
    workload: str
    preset: str
    overrides: Mapping[str, Any]
    knobs: Mapping[str, Any]
    fields: tuple[FieldUse, ...]
    parameters: int | None = None  # trainable parameters of the network it describes (None: not counted here)
    shape_note: str = ""           # how the network was matched (a built-in preset, or overrides over one)

    def not_modelled(self) -> list[FieldUse]:
        return [f for f in self.fields if f.use == NOT_MODELLED]

    def summary_lines(self) -> list[str]:
        """What `msbench predict --config` prints above the prediction: the cell, the parameter count, the
        knobs, and every field not modelled, grouped by reason."""
        size = "" if not self.parameters else f"{self.parameters / 1e9:.2f} B" if self.parameters >= 1e9 else \
            f"{self.parameters / 1e6:.1f} M"
        count = f", {size} parameters ({self.parameters:,})" if self.parameters else ""
        lines = [f"config: {self.file} ({self.format}): {self.workload} ({self.preset}){count}; --set over it",
                 f"  network: {self.shape_note}",
                 "  knobs: " + (", ".join(f"{k}={_text(v)}" for k, v in sorted(self.knobs.items())) or "none")]
        skipped = self.not_modelled()
        by_reason: dict[str, list[str]] = {}
        for use in skipped:
            by_reason.setdefault(use.to, []).append(f"{use.path}={_text(use.value)}")
        lines.append(f"  not modelled ({len(skipped)} of {len(self.fields)} fields):")
        lines += [f"    {', '.join(paths)}: {reason}" for reason, paths in by_reason.items()]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "workload": self.workload, "preset": self.preset,
                "overrides": dict(sorted(self.overrides.items())), "knobs": dict(sorted(self.knobs.items())),
                "parameters": self.parameters, "shape": self.shape_note,
                "fields": [f.to_dict() for f in self.fields]}


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted paths to leaves; a list (callbacks) is one leaf."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


@dataclass
class ConfigFields:
    """The leaves of one config and what became of each: claim a path with `knob`, `preset` or `skip`."""

    leaves: dict[str, Any]
    uses: dict[str, FieldUse] = field(default_factory=dict)

    def has(self, path: str) -> bool:
        return path in self.leaves

    def get(self, path: str, default: Any = None) -> Any:
        return self.leaves.get(path, default)

    def under(self, path: str) -> dict[str, Any]:
        """The leaves below `path` (a mapping the flattening split), keyed by the rest of their path."""
        prefix = path + "."
        return {k[len(prefix):]: v for k, v in self.leaves.items() if k.startswith(prefix)}

    def first(self, paths: tuple[str, ...], default: Any = None) -> tuple[str | None, Any]:
        """(path, value) of the first of `paths` the config has (aliases of one field), else (None, default)."""
        for path in paths:
            if path in self.leaves:
                return path, self.leaves[path]
        return None, default

    def knob(self, path: str | None, knob: str, value: Any, how: str = "") -> None:
        if path is not None and path in self.leaves:
            self.uses[path] = FieldUse(path, self.leaves[path], KNOB, f"{knob}={_text(value)}{how}")

    def preset(self, path: str | None, name: str, value: Any, how: str = "") -> None:
        if path is not None and path in self.leaves:
            self.uses[path] = FieldUse(path, self.leaves[path], PRESET, f"{name}={_text(value)}{how}")

    def skip(self, path: str | None, reason: str) -> None:
        if path is not None and path in self.leaves:
            self.uses[path] = FieldUse(path, self.leaves[path], NOT_MODELLED, reason)

    def paths_of(self, knob: str) -> list[str]:
        """The fields mapped to `knob`."""
        return [p for p, use in self.uses.items() if use.use == KNOB and use.to.partition("=")[0] == knob]

    def drop_knob(self, knob: str, reason: str) -> None:
        """A knob the target would refuse is left at its default: each field that set it becomes not modelled."""
        for path, use in list(self.uses.items()):
            if use.use == KNOB and use.to.partition("=")[0] == knob:
                why = reason.removeprefix(use.to.split(" ")[0] + ": ").removesuffix("; leave it at its default")
                self.uses[path] = FieldUse(path, use.value, NOT_MODELLED, f"{use.to} left at its default: {why}")

    def account(self, reasons: Mapping[str, str]) -> tuple[FieldUse, ...]:
        """Every leaf in file order: its claimed use, else not modelled with the reason of its longest
        matching prefix in `reasons` (a key or a table), else UNKNOWN."""
        out = []
        for path, value in self.leaves.items():
            if path in self.uses:
                out.append(self.uses[path])
                continue
            parts = path.split(".")
            prefixes = (".".join(parts[:i]) for i in range(len(parts), 0, -1))
            reason = next((reasons[p] for p in prefixes if p in reasons), UNKNOWN)
            out.append(FieldUse(path, value, NOT_MODELLED, reason))
        return tuple(out)


class Knobs(dict):
    """The knobs an importer gathers, each recorded as the use of the field that set it."""

    def __init__(self, fields: ConfigFields) -> None:
        super().__init__()
        self.fields = fields

    def put(self, path: str | None, knob: str, value: Any, how: str = "") -> None:
        self[knob] = value
        self.fields.knob(path, knob, value, how)

    def copy_fields(self, pairs: tuple[tuple[str, str], ...]) -> None:
        """Each (path, knob) the config has, its value as it is."""
        for path, knob in pairs:
            if self.fields.has(path):
                self.put(path, knob, self.fields.get(path))

    def named(self, path: str, table: Mapping[Any, Any], knob: str) -> None:
        """The knob value `table` gives the field's name (case-insensitive); a name it lacks is not modelled."""
        if not self.fields.has(path):
            return
        value = self.fields.get(path)
        found = table.get(value.lower() if isinstance(value, str) else value)
        if found is None:
            self.fields.skip(path, f"no msbench {knob} is this one (known: {', '.join(map(str, table))})")
        else:
            self.put(path, knob, found)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
