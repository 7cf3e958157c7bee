"""Declarative experiment matrices: TOML in (read by msbench.matrix_file), validated cells with stable ids out.

A matrix names workloads (with presets), `base` settings, `axes` (knob -> values), an expansion
`strategy` (grid | ofat | pairwise), `exclude`/`include` rules and a `baseline`. Invalid cells are
kept and listed with the rule they break; nothing is dropped silently.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from hardware.mindspore.accuracy import ACCURACY_SEEDS as DEFAULT_ACCURACY_SEEDS
from hardware.scenarios import scenario_refusal
from msbench.cell import Cell
from msbench.errors import ConfigError, UserError
from msbench.scenario import DEFAULT_SCENARIO
from msbench.settings import DEFAULTS, make_settings, recorded_settings
from workloads.registry import get_workload

CELL_KEYS = {"workload", "preset", "target"}
# A guard against a typo that multiplies a grid (59,049 cells from ten 3-valued axes): `--max-cells` raises it.
MAX_CELLS = 5000


@dataclass(frozen=True)
class WorkloadEntry:
    name: str
    preset: str
    overrides: Mapping[str, Any]
    base: Mapping[str, Any]          # per-workload settings over the matrix base (e.g. its batch size)


@dataclass(frozen=True)
class Entry:
    """A cell with its expansion status: ok, invalid (breaks a rule) or excluded (by an exclude rule)."""

    cell: Cell
    status: str
    reason: str = ""
    baseline: bool = False

    @property
    def status_text(self) -> str:
        text = self.status + (" (baseline)" if self.baseline else "")
        return f"{text}: {self.reason}" if self.reason else text


@dataclass
class Expansion:
    matrix: "Matrix"
    entries: list[Entry]

    def cells(self) -> list[Cell]:
        return [e.cell for e in self.entries if e.status == "ok"]

    def baseline_of(self, cell: Cell) -> Cell | None:
        for e in self.entries:
            if e.baseline and e.cell.workload == cell.workload and e.cell.preset == cell.preset \
                    and e.cell.target == cell.target and dict(e.cell.overrides) == dict(cell.overrides):
                return e.cell
        return None

    def counts(self) -> dict[str, int]:
        out = {"total": len(self.entries)}
        for e in self.entries:
            out[e.status] = out.get(e.status, 0) + 1
        return out

    def summary_line(self) -> str:
        c = self.counts()
        return (f"{self.matrix.name}: {c['total']} cells, {c.get('ok', 0)} ok, {c.get('invalid', 0)} invalid, "
                f"{c.get('excluded', 0)} excluded ({self.matrix.strategy})")

    def to_json(self) -> dict[str, Any]:
        return {
            "matrix": self.matrix.name,
            "strategy": self.matrix.strategy,
            "counts": self.counts(),
            "cells": [{**e.cell.to_dict(), "status": e.status, "reason": e.reason, "baseline": e.baseline}
                      for e in self.entries],
        }


@dataclass(frozen=True)
class Matrix:
    name: str
    description: str
    targets: tuple[str, ...]
    strategy: str
    accuracy: bool
    workloads: tuple[WorkloadEntry, ...]
    base: Mapping[str, Any]
    axes: Mapping[str, list[Any]]
    exclude: tuple[Mapping[str, Any], ...] = ()
    include: tuple[Mapping[str, Any], ...] = ()
    baseline: Mapping[str, Any] = field(default_factory=dict)
    accuracy_seeds: int = DEFAULT_ACCURACY_SEEDS     # tiny-preset runs per accuracy, seeds seed, seed + 1, ...
    scenario: str = DEFAULT_SCENARIO                 # train | inference, for every cell (msbench.scenario)
    profile: bool = False                            # real targets: MindSpore's Profiler over extra steps
    # The numerics knobs whose values get their own accuracy runs (None: all). A cell whose run would differ
    # from the defaults in another numerics knob gets no accuracy, with the reason: the cold cost of a matrix
    # is its distinct accuracy runs, and only some of them feed a claim.
    accuracy_knobs: tuple[str, ...] | None = None

    def expand(self, max_cells: int = MAX_CELLS) -> Expansion:
        """Every cell with its status; more than `max_cells` candidate cells is refused before any is built."""
        self._check_size(max_cells)
        entries: dict[str, Entry] = {}
        for wl in self.workloads:
            base = {**self.base, **wl.base}
            baseline_values = {**base, **self.baseline}
            points = list(self._points(base))
            for target in self.targets:
                candidates = [{**base, **point} for point in points]
                candidates += [{**base, **_knobs_of(inc)} for inc in self.include if _applies(inc, wl, target)]
                baseline_entry = self._entry(wl, target, baseline_values, baseline_values, baseline=True)
                entries.setdefault(baseline_entry.cell.id, baseline_entry)
                for values in candidates:
                    entry = self._entry(wl, target, values, baseline_values)
                    entries.setdefault(entry.cell.id, entry)
        if not entries:
            raise ConfigError("workloads", [], "at least one workload and one target", self.name)
        return Expansion(self, list(entries.values()))

    def _check_size(self, max_cells: int) -> None:
        if self.strategy == "grid":
            points = math.prod(len(v) for v in self.axes.values())
        elif self.strategy == "ofat":
            points = 1 + sum(len(v) for v in self.axes.values())
        else:
            points = math.prod(sorted(len(v) for v in self.axes.values())[-2:])   # pairwise: about the two largest
        cells = len(self.workloads) * len(self.targets) * (points + len(self.include) + 1)
        if cells > max_cells:
            raise UserError(f"{self.name}: {cells} cells exceed the limit of {max_cells}; pass --max-cells {cells} "
                            f"to allow them, or narrow the axes (strategy=ofat|pairwise)")

    def _points(self, base: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        names = list(self.axes)
        if not names:
            return iter([{}])
        if self.strategy == "grid":
            return (dict(zip(names, combo)) for combo in itertools.product(*self.axes.values()))
        if self.strategy == "ofat":
            ofat = [{name: v} for name in names for v in self.axes[name] if v != base.get(name, DEFAULTS[name])]
            return iter([{}] + ofat)
        return iter(pairwise_points(self.axes))

    def _entry(self, wl: WorkloadEntry, target: str, values: Mapping[str, Any],
               baseline_values: Mapping[str, Any], baseline: bool = False) -> Entry:
        diff = {k: v for k, v in sorted(values.items()) if baseline_values.get(k, DEFAULTS[k]) != v}
        diff.update({k: DEFAULTS[k] for k in baseline_values if k not in values and baseline_values[k] != DEFAULTS[k]})
        label = ",".join(f"{k}={_text(v)}" for k, v in sorted(diff.items())) or "base"
        if self.scenario != DEFAULT_SCENARIO:        # labels name asv parameters and pair records: keep them apart
            label = f"{self.scenario}:{label}"
        common = dict(workload=wl.name, preset=wl.preset, overrides=dict(wl.overrides), target=target, label=label,
                      scenario=self.scenario)
        try:
            cell = Cell(settings=make_settings(values), **common)
            check_workload_settings(cell)
        except ConfigError as err:
            # Keep the invalid cell visible, identified by its raw values.
            cell = _invalid_cell(values, common)
            return Entry(cell, "invalid", str(err), baseline)
        refused = scenario_refusal(cell.settings, cell.scenario)
        if refused:
            return Entry(cell, "invalid", refused, baseline)
        for i, rule in enumerate(self.exclude):
            if _matches(rule, cell):
                return Entry(cell, "excluded", f"exclude rule #{i + 1} {dict(rule)}", baseline)
        return Entry(cell, "ok", "", baseline)


def check_workload_settings(cell: Cell) -> None:
    """The rules that need the workload (heads divisible by tensor_parallel, a layer per pipeline stage,
    no parallel plan outside the LLM stack): a ConfigError, as for the settings' own rules."""
    workload = get_workload(cell.workload)
    workload.check_settings(workload.preset(cell.preset, cell.overrides), cell.settings)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _invalid_cell(values: Mapping[str, Any], common: dict[str, Any]) -> Cell:
    """A Cell that bypasses the combination rules, so an invalid cell still has a stable id."""
    return Cell(settings=recorded_settings(values), **common)


def _knobs_of(table: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k not in CELL_KEYS}


def _applies(include: Mapping[str, Any], wl: WorkloadEntry, target: str) -> bool:
    """An include rule adds its cell only where its workload/preset/target keys (when given) match."""
    return all(include.get(key, value) == value for key, value in
               (("workload", wl.name), ("preset", wl.preset), ("target", target)))


def _matches(rule: Mapping[str, Any], cell: Cell) -> bool:
    fields = {"workload": cell.workload, "preset": cell.preset, "target": cell.target, **cell.settings.to_dict()}
    return all(fields.get(k) == v for k, v in rule.items())


def pairwise_points(axes: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """A covering array of strength 2: every pair of values of any two knobs appears in some point."""
    names = list(axes)
    if len(names) < 2:
        return [{names[0]: v} for v in axes[names[0]]] if names else [{}]
    from allpairspy import AllPairs

    return [dict(zip(names, row)) for row in AllPairs([list(axes[n]) for n in names])]
