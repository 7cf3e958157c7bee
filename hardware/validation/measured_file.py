"""Reading a user's own measured runs (`msbench validate --measured FILE`) into published-style cases.

Three forms, one meaning: a TOML file of `[[runs]]`, a CSV with the same columns (settings and overrides
as `name=value;name=value`), or MindSpore `TimeMonitor` log lines with the run's settings given on the
command line. Every form becomes the same raw run and goes through `run_case`, so the same run gives the
same case whatever file it came in; a run's knobs resolve through `make_settings` and its preset through
`check_preset`, exactly as a published case's do (hardware/validation/cases.py). A bad value is a
ConfigError naming the file, its line, the field, the value and what is allowed.
"""

from __future__ import annotations

import csv
import re
import statistics
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from hardware.validation.cases import STATED_KNOBS, PublishedCase, check_preset
from msbench.cell import parse_overrides
from msbench.errors import ConfigError, UserError
from msbench.settings import make_settings, parse_assignments
from hardware.model.profile import profile_names

# What one run states (TOML keys and CSV columns): exactly one of the two measured figures.
FIGURES = {"step_time_ms": "ms/step", "samples_per_s": "samples/s"}
RUN_KEYS = ("id", "workload", "preset", "overrides", "settings", "profile", *FIGURES, "mindspore", "source", "notes")
SPLIT = "measured"                    # a user's runs belong to neither part of published.toml
# MindSpore 2.x `TimeMonitor.epoch_end`: "{Mode} epoch time: {:5.3f} ms, per step time: {:5.3f} ms"
# (+ " (data time: ...)"); older releases print no mode. Eval epochs are not training steps.
TIME_MONITOR = re.compile(r"(?:(?P<mode>\w+) )?epoch time: (?P<epoch>\S+) ms, per step time: (?P<step>\S+) ms")


@dataclass(frozen=True)
class LogRun:
    """What a TimeMonitor log does not say: the run's workload and settings (`--workload`, `--set`, ...)."""

    workload: str
    preset: str = "full"
    sets: Sequence[str] = ()
    overrides: Sequence[str] = ()


@contextmanager
def located(where: str) -> Iterator[None]:
    """Give a ConfigError raised without a place the place of the line being read."""
    try:
        yield
    except ConfigError as err:
        if err.where:
            raise
        raise ConfigError(err.field, err.value, err.allowed, where, err.rule) from None
    except UserError as err:                        # parse_overrides' one-line error
        raise UserError(f"{where}: {err}") from None


def read_measured(path: Path, profile: str, log_run: LogRun | None = None) -> list[PublishedCase]:
    """The runs of FILE as cases on `profile` (unless a run names its own): by suffix, TOML, CSV, or a log."""
    if not path.is_file():
        raise ConfigError("--measured", str(path), "an existing .toml, .csv or TimeMonitor log file")
    kind = {".toml": "toml", ".csv": "csv"}.get(path.suffix.lower(), "log")
    if kind != "log" and log_run is not None:
        raise ConfigError("--workload", log_run.workload, f"only with a TimeMonitor log (a {kind} file states each "
                          "run's workload and settings)", str(path))
    if kind == "log" and log_run is None:
        raise ConfigError("--workload", None, "the workload of the logged run (with --set KNOB=VALUE for its "
                          "settings)", str(path))
    raws = {"toml": toml_runs, "csv": csv_runs}[kind](path) if kind != "log" else [log_runs(path, log_run)]
    cases = [run_case(raw, where, profile, path) for raw, where in raws]
    ids = [c.id for c in cases]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ConfigError("id", duplicate, "unique run ids", str(path))
    return cases


def toml_runs(path: Path) -> list[tuple[dict[str, Any], str]]:
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        line = re.search(r"at line (\d+)", str(err))
        raise ConfigError("toml", str(err), "a valid TOML file of [[runs]] tables",
                          f"{path}:{line[1]}" if line else str(path)) from None
    extra = sorted(set(data) - {"runs"})
    if extra or not data.get("runs"):
        raise ConfigError("table", extra[0] if extra else None, "one or more [[runs]] tables", str(path))
    lines = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s*\[\[\s*runs\s*\]\]", line)]
    return [(dict(raw), f"{path}:{line} run {i}") for i, (raw, line) in enumerate(zip(data["runs"], lines), 1)]


def csv_runs(path: Path) -> list[tuple[dict[str, Any], str]]:
    """Rows as TOML runs: figures as numbers, settings through the knobs' own parser, overrides as --override."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        unknown = sorted(set(reader.fieldnames or ()) - set(RUN_KEYS))
        if unknown:
            raise ConfigError("column", unknown[0], ", ".join(RUN_KEYS), f"{path}:1")
        out = []
        for row in reader:
            where = f"{path}:{reader.line_num} row {len(out) + 1}"
            raw: dict[str, Any] = {k: v.strip() for k, v in row.items() if v and v.strip()}
            with located(where):
                for name in FIGURES:
                    if name in raw:
                        raw[name] = number(name, raw[name])
                raw["settings"] = parse_assignments(split_pairs(raw.get("settings", "")))
                raw["overrides"] = parse_overrides(split_pairs(raw.get("overrides", "")))
            out.append((raw, where))
    if not out:
        raise ConfigError("rows", 0, "one or more runs under the header", str(path))
    return out


def split_pairs(text: str) -> list[str]:
    return [p.strip() for p in text.split(";") if p.strip()]


def number(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(name, text, "a positive number") from None


def log_runs(path: Path, run: LogRun) -> tuple[dict[str, Any], str]:
    """One run from TimeMonitor lines: the median per-step time of the training epochs after the first
    (the first epoch's time includes graph compilation and the dataset's warm-up)."""
    steps = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        match = TIME_MONITOR.search(line)
        if not match or (match["mode"] or "").lower() == "eval":
            continue
        with located(f"{path}:{n}"):
            steps.append(number("per step time", match["step"]))
    if len(steps) < 2:
        raise ConfigError("epochs", len(steps), "at least 2 TimeMonitor training lines ('epoch time: ... ms, per "
                          "step time: ... ms'): the first epoch includes compilation, so the later ones are used",
                          str(path))
    with located(f"{path} (--set/--override)"):
        settings = parse_assignments(list(run.sets))
        overrides = parse_overrides(list(run.overrides))
    note = f"median per-step time of TimeMonitor epochs 2-{len(steps)} (epoch 1, with compilation, left out)"
    raw = {"id": path.stem, "workload": run.workload, "preset": run.preset, "settings": settings,
           "overrides": overrides, "step_time_ms": statistics.median(steps[1:]), "source": str(path), "notes": note}
    return raw, str(path)


def run_case(raw: Mapping[str, Any], where: str, profile: str, path: Path) -> PublishedCase:
    """One run as a case: the checks a published case's expressible fields get, with this file's places."""
    unknown = sorted(set(raw) - set(RUN_KEYS))
    if unknown:
        raise ConfigError("key", unknown[0], ", ".join(RUN_KEYS), where)
    if not raw.get("workload"):
        raise ConfigError("workload", raw.get("workload"), "the workload's registry name (msbench list workloads)",
                          where)
    given = [name for name in FIGURES if name in raw]
    if len(given) != 1:
        raise ConfigError("/".join(given) or "step_time_ms", None, "exactly one of step_time_ms, samples_per_s",
                          where)
    figure = raw[given[0]]
    if isinstance(figure, bool) or not isinstance(figure, (int, float)) or not figure > 0:
        raise ConfigError(given[0], figure, "a positive number", where)
    for name, kind in (("settings", dict), ("overrides", dict)):
        if not isinstance(raw.get(name, {}), kind):
            raise ConfigError(name, raw[name], "a table of name = value", where)
    knobs = dict(raw.get("settings", {}))
    missing = [k for k in STATED_KNOBS if k not in knobs]
    if missing:
        raise ConfigError("settings", missing[0], "stated in every run: " + ", ".join(STATED_KNOBS), where)
    make_settings(knobs, where)                    # each knob real, each value allowed, as for a published case
    run_profile = raw.get("profile", profile)
    if run_profile not in profile_names():
        raise ConfigError("profile", run_profile, ", ".join(profile_names()), where)
    case = PublishedCase(
        id=str(raw.get("id") or f"run{where.rsplit(' ', 1)[-1]}"), expressible=True,
        source=str(raw.get("source", path)), chip=run_profile, mindspore=str(raw.get("mindspore", "-")),
        figure=float(figure), unit=FIGURES[given[0]], published=knobs, note=str(raw.get("notes", "")), split=SPLIT,
        profile=run_profile, workload=str(raw["workload"]), preset=str(raw.get("preset", "full")),
        overrides=dict(raw.get("overrides", {})), knobs=knobs)
    check_preset(case, where)
    return case
