"""The schema of `published.toml`: typed, checked cases and one-knob pairs.

A case is one published figure with the settings of its run as the source gives them
(`published`), and, where msbench can express that recipe, the msbench cell that stands for it
(`workload`, `preset`, `overrides`, `knobs`) and the profile of its chip. Settings the source does
not state, or that msbench can only approximate, are listed in `assumed`, so a reader sees what
the comparison rests on. A recipe msbench cannot express is kept with `why`, not bent to fit.

Every case belongs to one part, `split = "dev" | "locked"`, set by its source alone (`split_of`: a
third of the sources, by a hash of their URL, chosen before any model error was looked at). Model
work is checked against the development part (`msbench validate`); the locked part is held out and
reported only on request (`msbench validate --profile X --locked`), once a change is
done, so its figures have not steered the change. A pair inherits its cases' part; the loader
refuses a case whose `split` disagrees with its source's and a pair that straddles the parts.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from msbench.conventions import data_format_of, graph_jit_level
from msbench.errors import ConfigError
from msbench.resources import suite_path
from msbench.settings import Settings, make_settings
from workloads.registry import WORKLOADS, ZOOS, get_workload, zoo_of
from hardware.model.profile import profile_names

PUBLISHED = suite_path("hardware/validation/published.toml")
# Published units and what they measure: a step time, samples per second over all devices, or tokens
# per second (kept only on cases msbench cannot express: converting it needs the run's layout).
UNITS = {"ms/step": "step", "img/s": "throughput", "sentences/s": "throughput", "samples/s": "throughput",
         "tokens/s": "tokens", "tokens/s/p": "tokens_per_device"}
CASE_KEYS = {"id", "expressible", "source", "repo", "path", "commit", "chip", "mindspore", "figure", "unit",
             "published", "note", "why", "profile", "workload", "preset", "overrides", "knobs", "assumed", "fits", "split",
             "reader"}
REQUIRED = ("id", "expressible", "source", "chip", "mindspore", "figure", "unit", "published", "note", "split")
EXPRESSIBLE_REQUIRED = ("profile", "workload", "knobs")
PAIR_KEYS = {"a", "b", "differs", "note"}
# Knobs a case must state: without them its samples per step, and so its step time, are undefined.
STATED_KNOBS = ("batch_size", "devices", "mode")
SPLITS = ("dev", "locked")
LOCKED_EVERY = 3          # one source in LOCKED_EVERY (by its URL's hash) is locked


def split_of(source: str) -> str:
    """The part a source's cases belong to: `locked` when the first 32 bits of sha256(URL) are a multiple
    of LOCKED_EVERY. It reads nothing but the URL, so no error can move a case between the parts."""
    return "locked" if int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) % LOCKED_EVERY == 0 else "dev"


@dataclass(frozen=True)
class PublishedCase:
    id: str
    expressible: bool
    source: str                          # URL of the page the figure is read from
    chip: str                            # as the source names it ("Ascend 910", "Ascend 910*", ...)
    mindspore: str                       # MindSpore version of the run, as published
    figure: float
    unit: str                            # a key of UNITS
    published: Mapping[str, Any]         # the run's settings in the source's own words
    note: str
    split: str                           # "dev" or "locked": split_of(source)
    repo: str = ""                       # where the source is a repository file: owner/name, path, commit
    path: str = ""
    commit: str = ""
    why: str = ""                        # why msbench cannot express it (expressible = false)
    profile: str = ""
    workload: str = ""
    preset: str = "full"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    knobs: Mapping[str, Any] = field(default_factory=dict)   # as stated, plus those the conventions derive
    assumed: tuple[str, ...] = ()        # settings not stated by the source, or approximated by msbench
    reader: str = ""                     # the source's dataset class: its data_format follows (msbench.conventions)
    fits: bool | None = True             # the source ran it, so it fits in device memory

    @property
    def settings(self) -> Settings:
        return make_settings(dict(self.knobs), f"{PUBLISHED.name} case {self.id}")

    @property
    def samples_per_step(self) -> int:
        """Samples of one optimizer step over all devices (what a published img/s counts): each replica's
        batch (which the pipeline splits into micro-batches) x accumulation, times the data-parallel replicas."""
        s = self.settings
        return int(s.batch_size or 0) * s.grad_accum * s.data_parallel

    @property
    def per_step(self) -> float:
        """What the published rate counts per step: samples, or tokens per card (MindFormers' tokens/s/p)."""
        if UNITS[self.unit] != "tokens_per_device":
            return float(self.samples_per_step)

        seq = get_workload(self.workload).preset(self.preset, dict(self.overrides)).seq_len
        return self.samples_per_step * seq / self.settings.devices

    @property
    def published_step_s(self) -> float:
        """The published figure as seconds per step."""
        if UNITS[self.unit] == "step":
            return self.figure / 1000.0
        return self.per_step / self.figure

    def in_unit(self, step_s: float) -> float:
        """A step time expressed in this case's published unit."""
        return step_s * 1000.0 if UNITS[self.unit] == "step" else self.per_step / step_s


@dataclass(frozen=True)
class Pair:
    """Two cases of one source that differ in one setting: `differs` is a knob name or `profile`."""

    a: str
    b: str
    differs: str
    note: str = ""
    split: str = "dev"                  # its cases' part (they share it)


@dataclass(frozen=True)
class Catalogue:
    cases: tuple[PublishedCase, ...]
    pairs: tuple[Pair, ...]

    def case(self, case_id: str) -> PublishedCase:
        return next(c for c in self.cases if c.id == case_id)

    def expressible(self, profile: str | None = None) -> list[PublishedCase]:
        return [c for c in self.cases if c.expressible and (profile is None or c.profile == profile)]

    def part(self, split: str) -> "Catalogue":
        """The cases and pairs of one part ("dev" or "locked")."""
        if split not in SPLITS:
            raise ConfigError("split", split, ", ".join(SPLITS))
        return Catalogue(tuple(c for c in self.cases if c.split == split),
                         tuple(p for p in self.pairs if p.split == split))


def load_catalogue(path: Path = PUBLISHED) -> Catalogue:
    """Parse and check the file: every rule here is one a reader of the table relies on."""
    data = tomllib.loads(path.read_text())
    extra = sorted(set(data) - {"case", "pair"})
    if extra:
        raise ConfigError("table", extra[0], "case, pair", str(path))
    cases = tuple(parse_case(raw, path) for raw in data.get("case", []))
    ids = [c.id for c in cases]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ConfigError("id", duplicate, "unique case ids", str(path))
    catalogue = Catalogue(cases, ())
    pairs = tuple(parse_pair(raw, catalogue, path) for raw in data.get("pair", []))
    return Catalogue(cases, pairs)


def parse_case(raw: Mapping[str, Any], path: Path) -> PublishedCase:
    where = f"{path.name} case {raw.get('id', '?')}"
    unknown = sorted(set(raw) - CASE_KEYS)
    if unknown:
        raise ConfigError("key", unknown[0], ", ".join(sorted(CASE_KEYS)), where)
    for name in REQUIRED:
        if name not in raw or raw[name] in ("", {}):
            raise ConfigError(name, None, "a non-empty value (every case names its source and its settings)", where)
    if raw["split"] != split_of(raw["source"]):
        raise ConfigError("split", raw["split"], f"{split_of(raw['source'])} (split_of its source: the part is the "
                          "source's, never chosen per case)", where)
    if raw["unit"] not in UNITS:
        raise ConfigError("unit", raw["unit"], ", ".join(UNITS), where)
    if not isinstance(raw["figure"], (int, float)) or raw["figure"] <= 0:
        raise ConfigError("figure", raw["figure"], "a positive number", where)
    if raw["expressible"]:
        if UNITS[raw["unit"]] == "tokens":
            raise ConfigError("unit", raw["unit"], "ms/step or a samples/s unit for an expressible case", where)
        for name in EXPRESSIBLE_REQUIRED:
            if not raw.get(name):
                raise ConfigError(name, None, "required for an expressible case", where)
        missing = [k for k in STATED_KNOBS if k not in raw["knobs"]]
        if missing:
            raise ConfigError("knobs", missing[0], "stated in every expressible case: " + ", ".join(STATED_KNOBS),
                              where)

        if raw["profile"] not in profile_names():
            raise ConfigError("profile", raw["profile"], ", ".join(profile_names()), where)
    elif not raw.get("why"):
        raise ConfigError("why", None, "the reason msbench cannot express the recipe", where)
    knobs = with_conventions(raw, where) if raw["expressible"] else raw.get("knobs", {})
    case = PublishedCase(**{**raw, "figure": float(raw["figure"]), "assumed": tuple(raw.get("assumed", ())),
                            "knobs": knobs})
    if case.expressible:
        case.settings                                   # every knob is a real one with an allowed value
        check_preset(case, where)
    return case


def with_conventions(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The case's knobs with those its source's own terms fix (msbench.conventions: the dataset class's
    data_format, the release's graph jit level). A case that states one of them as a knob is refused, so
    each is written one way: as the source's term."""
    stated = dict(raw["knobs"])
    derived: dict[str, Any] = {}
    if raw.get("reader"):
        derived["data_format"] = data_format_of(raw["reader"], where)
    if stated.get("mode") == "graph" and (level := graph_jit_level(raw["mindspore"])):
        derived["jit_level"] = level
    for knob, value in derived.items():
        if knob in stated:
            raise ConfigError("knobs", f"{knob}={stated[knob]}", f"nothing: {knob}={value} follows from the case's "
                              f"{'reader' if knob == 'data_format' else 'mindspore release'} (msbench.conventions)",
                              where)
    return {**stated, **derived}


def check_preset(case: PublishedCase, where: str) -> None:
    if case.workload not in WORKLOADS and zoo_of(case.workload) is None:
        raise ConfigError("workload", case.workload, ", ".join(WORKLOADS) + ", or <zoo>:<model> (" + ", ".join(ZOOS) + ")",
                          where)
    try:
        get_workload(case.workload).preset(case.preset, dict(case.overrides))
    except ConfigError as err:
        raise ConfigError(err.field, err.value, err.allowed, where, err.rule) from None


def parse_pair(raw: Mapping[str, Any], catalogue: Catalogue, path: Path) -> Pair:
    where = f"{path.name} pair {raw.get('a', '?')}/{raw.get('b', '?')}"
    unknown = sorted(set(raw) - PAIR_KEYS)
    if unknown:
        raise ConfigError("key", unknown[0], ", ".join(sorted(PAIR_KEYS)), where)
    ids = {c.id for c in catalogue.expressible()}
    for side in ("a", "b"):
        if raw.get(side) not in ids:
            raise ConfigError(side, raw.get(side), "the id of an expressible case", where)
    a, b = catalogue.case(raw["a"]), catalogue.case(raw["b"])
    if a.split != b.split:
        raise ConfigError("split", f"{a.split}/{b.split}", "both cases of a pair in one part", where)
    pair = Pair(raw["a"], raw["b"], raw.get("differs", ""), raw.get("note", ""), a.split)
    knob_diff = sorted(k for k in set(a.settings.to_dict()) if getattr(a.settings, k) != getattr(b.settings, k))
    other = [name for name in ("workload", "preset", "overrides") if getattr(a, name) != getattr(b, name)]
    actual = knob_diff + (["profile"] if a.profile != b.profile else []) + other
    # A source's one change can be two msbench knobs where a settings rule ties them (fp32 has no loss scaler):
    # `differs` then names both, comma-separated.
    if sorted(actual) != sorted(name.strip() for name in pair.differs.split(",")):
        differ = ", ".join(actual) or "nothing"
        raise ConfigError("differs", pair.differs, f"exactly what the two cases differ in: {differ}", where)
    return pair
