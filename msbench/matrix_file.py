"""Reading a matrix file: its TOML keys, their types and values (each error names the file and the key), into
a msbench.matrix.Matrix, which expands it into cells.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Mapping

from hardware.capabilities import NUMERICS
from hardware.mindspore.accuracy import ACCURACY_SEEDS as DEFAULT_ACCURACY_SEEDS
from msbench.errors import ConfigError, UserError
from msbench.matrix import CELL_KEYS, Matrix, WorkloadEntry
from msbench.names import check_name
from msbench.resources import suite_path
from msbench.scenario import DEFAULT_SCENARIO, check_scenario
from msbench.settings import DEFAULTS, check_value
from msbench.targets import check_target_name
from workloads.registry import WORKLOADS, check_workload, get_workload

STRATEGIES = ("grid", "ofat", "pairwise")
TOP_KEYS = {"name", "description", "targets", "strategy", "accuracy", "accuracy_seeds", "accuracy_knobs", "workloads",
            "base", "axes", "exclude", "include", "baseline", "scenario", "profile"}
WORKLOAD_KEYS = {"name", "preset", "overrides", "recipe", "set", "config"}
CONFIG_DECIDES = ("name", "preset", "recipe")   # with `config = "FILE.yaml"` the file names these


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
    return parse_matrix(data, str(path), path.stem, target, extra, plugins, path.parent)


def parse_matrix(data: Mapping[str, Any], where: str, default_name: str, target: str | None = None,
                 extra: Mapping[str, Any] | None = None, plugins: tuple[str, ...] = (),
                 folder: Path | None = None) -> Matrix:
    """The one schema of a matrix file: every key's type, every name checked, nothing imported. A workload's
    `config` path is read relative to `folder` (the matrix file's)."""
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
    workloads = tuple(_workload_entry(w, f"{where}: workloads[{i}]", plugins, folder)
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


def _workload_entry(table: Mapping[str, Any], where: str, plugins: tuple[str, ...] = (),
                    folder: Path | None = None) -> WorkloadEntry:
    _check_keys(table, WORKLOAD_KEYS, where, "workload key")
    if "config" in table:
        return _config_entry(table, where, folder or Path("."))
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
        # lazy: on the CLI's startup path; the recipes file is read only when a matrix starts from one
        from workloads.recipes import recipe_settings

        start = _knob_table(recipe_settings(name, where), f"{where}.recipe", "recipe")
    return WorkloadEntry(name, preset, dict(overrides),
                         {**start, **_knob_table(table.get("set", {}), f"{where}.set", "set")})


def _config_entry(table: Mapping[str, Any], where: str, folder: Path) -> WorkloadEntry:
    """`config = "FILE.yaml"` (a path relative to the matrix file): the workload, preset, overrides and knobs of
    a user's training config (msbench/importers), with the entry's `overrides` and `set` over them."""
    # PyYAML and the importers: only for a matrix that names a config
    from msbench.importers import import_config

    path = _typed(table, "config", str, "", where, "a config file path (a string)")
    given = [key for key in CONFIG_DECIDES if key in table]
    if given:
        raise ConfigError(given[0], table[given[0]], f"absent with config = {path!r} (the config names the network "
                          "and its settings; overrides and set go over it)", where)
    imported = import_config(folder / path)
    overrides = {**imported.overrides, **_table(table.get("overrides", {}), "overrides", where)}
    get_workload(imported.workload).preset(imported.preset, overrides)
    knobs = {**_knob_table(dict(imported.knobs), f"{where}.config", "config"),
             **_knob_table(table.get("set", {}), f"{where}.set", "set")}
    return WorkloadEntry(imported.workload, imported.preset, overrides, knobs)


def _preset_names(workload: str) -> list[str]:
    """Preset names from the family's presets.toml, read as data (no import of the workload module); a
    zoo adapter's or plugin's from the workload itself (its class is trusted by now)."""
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
