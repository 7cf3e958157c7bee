"""A cell of the matrix: (workload, preset, preset overrides, settings, target, scenario), with a stable id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from msbench.errors import UserError
from msbench.scenario import DEFAULT_SCENARIO, check_scenario
from msbench.settings import Settings, recorded_settings


def canonical_json(obj: Any) -> str:
    """Key-order-independent JSON: the same value gives the same text on every machine."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def parse_overrides(pairs: Sequence[str]) -> dict[str, object]:
    """`--override seq_len=512` -> {"seq_len": 512}: values are TOML literals, bare words are strings."""
    import tomllib

    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--override={pair!r} is not allowed; allowed: FIELD=VALUE")
        try:
            out[name.strip()] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            out[name.strip()] = text
    return out


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One run to make. Only non-default knobs enter the id, so adding a new knob keeps old ids."""

    workload: str
    preset: str = "tiny"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    target: str = "model:ascend910b"
    label: str = "base"
    scenario: str = DEFAULT_SCENARIO     # train | inference (msbench.scenario)

    def __post_init__(self) -> None:
        check_scenario(self.scenario, f"cell {self.workload}")

    def key(self) -> dict[str, Any]:
        """The identity; `scenario` only when it is not `train`, so every training cell keeps its old id."""
        key = {
            "workload": self.workload,
            "preset": self.preset,
            "overrides": dict(sorted(self.overrides.items())),
            "settings": self.settings.non_default(),
            "target": self.target,
        }
        if self.scenario != DEFAULT_SCENARIO:
            key["scenario"] = self.scenario
        return key

    @property
    def id(self) -> str:
        return hashlib.sha256(canonical_json(self.key()).encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return {**self.key(), "label": self.label, "id": self.id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Cell":
        """A cell as written (a record, a request to a child): values are checked, the combination rules
        are not, so an `invalid` cell reads back with its id. Rules judge user input (make_settings)."""
        return cls(
            workload=data["workload"],
            preset=data.get("preset", "tiny"),
            overrides=dict(data.get("overrides", {})),
            settings=recorded_settings(data.get("settings", {})),
            target=data.get("target", "model:ascend910b"),
            label=data.get("label", "base"),
            scenario=data.get("scenario", DEFAULT_SCENARIO),
        )

    def with_target(self, target: str) -> "Cell":
        return Cell(workload=self.workload, preset=self.preset, overrides=self.overrides,
                    settings=self.settings, target=target, label=self.label, scenario=self.scenario)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and other.id == self.id
