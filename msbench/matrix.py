"""Declarative experiment matrices: TOML in, validated cells with stable ids out.

A matrix names workloads (with presets), `base` settings, `axes` (knob -> values), an expansion
`strategy` (grid | ofat | pairwise), `exclude`/`include` rules and a `baseline`. Invalid cells are
kept and listed with the rule they break; nothing is dropped silently.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from hardware.capabilities import NUMERICS
from hardware.mindspore.accuracy import ACCURACY_SEEDS as DEFAULT_ACCURACY_SEEDS
from hardware.scenarios import scenario_refusal
from msbench.cell import Cell
from msbench.errors import ConfigError, UserError
from msbench.names import check_name
from msbench.resources import suite_path
from msbench.scenario import DEFAULT_SCENARIO, check_scenario
from msbench.settings import DEFAULTS, check_value, make_settings, recorded_settings
from msbench.targets import check_target_name

STRATEGIES = ("grid", "ofat", "pairwise")
TOP_KEYS = {"name", "description", "targets", "strategy", "accuracy", "accuracy_seeds", "accuracy_knobs", "workloads",
            "base", "axes", "exclude", "include", "baseline", "scenario", "profile"}
WORKLOAD_KEYS = {"name", "preset", "overrides", "recipe", "set"}
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
    from workloads.registry import get_workload

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


def load_matrix(path: str | Path, target: str | None = None, extra: Mapping[str, Any] | None = None,
                plugins: tuple[str, ...] = ()) -> Matrix:
    """Parse and check a matrix file; `target` replaces its targets, `extra` knobs (`--set`) go over its
    base; `plugins` are the `--allow-plugin` specs a target name may refer to."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise UserError(f"{path}: no such matrix file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a matrix file") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); a matrix is a TOML file") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: malformed TOML: {err}") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read the matrix file ({err.strerror})") from None
    return parse_matrix(data, str(path), path.stem, target, extra, plugins)


def parse_matrix(data: Mapping[str, Any], where: str, default_name: str, target: str | None = None,
                 extra: Mapping[str, Any] | None = None, plugins: tuple[str, ...] = ()) -> Matrix:
    """The one schema of a matrix file: every key's type, every name checked, nothing imported."""
    _check_keys(data, TOP_KEYS, where, "matrix key")
    strategy = _typed(data, "strategy", str, "grid", where, "|".join(STRATEGIES))
    if strategy not in STRATEGIES:
        raise ConfigError("strategy", strategy, "|".join(STRATEGIES), where)
    accuracy = _typed(data, "accuracy", bool, False, where, "true|false (a TOML boolean, not a string)")
    scenario = check_scenario(data.get("scenario", DEFAULT_SCENARIO), where)
    if accuracy and scenario != DEFAULT_SCENARIO:
        raise ConfigError("accuracy", accuracy, f"false under scenario={scenario!r} (accuracy is that of a tiny "
                          "training run; an inference cell trains nothing)", where)
    profile = _typed(data, "profile", bool, False, where, "true|false (a TOML boolean, not a string)")
    workloads = tuple(_workload_entry(w, f"{where}: workloads[{i}]", plugins)
                      for i, w in enumerate(_tables(data, "workloads", where)))
    if not workloads:
        raise ConfigError("workloads", [], "at least one [[workloads]] entry", where)
    base = _knob_table(data.get("base", {}), f"{where}: [base]", "base")
    base.update(_knob_table(dict(extra or {}), "--set"))
    axes = {}
    for name, values in _table(data.get("axes", {}), "axes", where).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"axes.{name}", values, "a non-empty list of values", where)
        _check_keys({name: None}, set(DEFAULTS), f"{where}: [axes]", "knob")
        for v in values:
            check_value(name, v, f"{where}: [axes]")
        axes[name] = values
    if target is not None:
        targets: tuple[str, ...] = (check_target_name(target, "--target", plugins),)
    else:
        listed = data.get("targets", ["model:ascend910b"])
        if not isinstance(listed, list) or not all(isinstance(t, str) for t in listed):
            raise ConfigError("targets", listed, 'a list of target names, e.g. ["model:ascend910b"]', where)
        if not listed:
            raise ConfigError("targets", listed, "at least one target, e.g. [\"model:ascend910b\"]", where)
        targets = tuple(check_target_name(t, where, plugins) for t in listed)
    return Matrix(
        name=check_name("name", data.get("name", default_name), where),
        description=_typed(data, "description", str, "", where, "a string"),
        targets=targets,
        strategy=strategy,
        accuracy=accuracy,
        workloads=workloads,
        base=base,
        axes=axes,
        exclude=_rules(data, "exclude", where, workloads, plugins),
        include=_rules(data, "include", where, workloads, plugins),
        baseline=_knob_table(data.get("baseline", {}), f"{where}: [baseline]", "baseline"),
        accuracy_seeds=_accuracy_seeds(data.get("accuracy_seeds", DEFAULT_ACCURACY_SEEDS), where),
        scenario=scenario,
        profile=profile,
        accuracy_knobs=_accuracy_knobs(data.get("accuracy_knobs"), accuracy, where),
    )


def _accuracy_knobs(value: Any, accuracy: bool, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    allowed = f"a list of numerics knobs ({', '.join(k for k in NUMERICS if k != 'seed')})"
    if not isinstance(value, list) or not all(isinstance(k, str) and k in NUMERICS and k != "seed" for k in value):
        raise ConfigError("accuracy_knobs", value, allowed, where)
    if not accuracy:
        raise ConfigError("accuracy_knobs", value, allowed, where, rule="only with accuracy = true")
    return tuple(value)


def _accuracy_seeds(value: Any, where: str) -> int:
    if type(value) is not int or not 1 <= value <= 64:
        raise ConfigError("accuracy_seeds", value, "an integer 1..64", where)
    return value


def _typed(data: Mapping[str, Any], key: str, kind: type, default: Any, where: str, allowed: str) -> Any:
    value = data.get(key, default)
    if type(value) is not kind:
        raise ConfigError(key, value, allowed, where)
    return value


def _table(value: Any, key: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(key, value, f"a table ([{key}] or {key} = {{...}})", where)
    return value


def _tables(data: Mapping[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigError(key, value, f"a list of tables ([[{key}]])", where)
    return value


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str, what: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(what, unknown[0], ", ".join(sorted(allowed)), where)


def _knob_table(table: Any, where: str, key: str = "knobs") -> dict[str, Any]:
    table = _table(table, key, where)
    _check_keys(table, set(DEFAULTS), where, "knob")
    for name, value in table.items():
        check_value(name, value, where)
    return dict(table)


def _workload_entry(table: Mapping[str, Any], where: str, plugins: tuple[str, ...] = ()) -> WorkloadEntry:
    from workloads.registry import check_workload, get_workload

    _check_keys(table, WORKLOAD_KEYS, where, "workload key")
    name = check_workload(table.get("name"), plugins, where)    # an untrusted module:Class is refused unimported
    preset = _typed(table, "preset", str, "tiny", where, "a preset name (a string)")
    presets = _preset_names(name)
    if presets and preset not in presets:
        raise ConfigError("preset", preset, "|".join(presets), f"{where} ({name})")
    overrides = _table(table.get("overrides", {}), "overrides", where)
    if overrides:
        # The preset class checks field names and types; the workload module imports no MindSpore.
        get_workload(name).preset(preset, overrides)
    start: dict[str, Any] = {}
    if _typed(table, "recipe", bool, False, where, "true or false"):   # workloads/recipes.toml, under `set`
        from workloads.recipes import recipe_settings

        start = _knob_table(recipe_settings(name, where), f"{where}.recipe", "recipe")
    return WorkloadEntry(name, preset, dict(overrides),
                         {**start, **_knob_table(table.get("set", {}), f"{where}.set", "set")})


def _preset_names(workload: str) -> list[str]:
    """Preset names from the family's presets.toml, read as data (no import of the workload module); a
    zoo adapter's or plugin's from the workload itself (its class is trusted by now)."""
    from workloads.registry import WORKLOADS, get_workload

    if workload not in WORKLOADS:
        return list(get_workload(workload).presets())
    package = WORKLOADS[workload].split(":")[0].split(".")[1]
    path = suite_path(f"workloads/{package}/presets.toml")
    if not path.exists():
        return []
    with open(path, "rb") as fh:
        return list(tomllib.load(fh).get(workload, {}))


def _rules(data: Mapping[str, Any], key: str, where: str, workloads: tuple[WorkloadEntry, ...],
           plugins: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(_rule(r, f"{where}: {key}[{i}]", workloads, plugins) for i, r in enumerate(_tables(data, key, where)))


def _rule(table: Mapping[str, Any], where: str, workloads: tuple[WorkloadEntry, ...],
          plugins: tuple[str, ...]) -> dict[str, Any]:
    """An include/exclude rule: knob values plus optional workload/preset/target, each a name this matrix
    could match (a rule that can never match is a typo, refused rather than ignored)."""
    _check_keys(table, set(DEFAULTS) | CELL_KEYS, where, "rule key")
    for name, value in table.items():
        if name in DEFAULTS:
            check_value(name, value, where)
    names = sorted({w.name for w in workloads})
    if "workload" in table and table["workload"] not in names:
        raise ConfigError("workload", table["workload"], "|".join(names) + " (the matrix's workloads)", where)
    presets = sorted({w.preset for w in workloads if table.get("workload", w.name) == w.name})
    if "preset" in table and table["preset"] not in presets:
        raise ConfigError("preset", table["preset"], "|".join(presets) + " (the presets the matrix runs)", where)
    if "target" in table:
        check_target_name(table["target"], where, plugins)
    return dict(table)
