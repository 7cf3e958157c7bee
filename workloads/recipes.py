"""The published recipe of a workload (workloads/recipes.toml): the settings its users train with, so a
prediction or a matrix baseline describes their job rather than MindSpore's API defaults."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from msbench.errors import ConfigError

RECIPE_PRESET = "full"          # recipes are for the published network size
FROM_CHOICES = ("recipe", "mindspore-defaults")


@dataclass(frozen=True)
class Recipe:
    workload: str
    source: str                          # where the recipe is published
    config: str                          # its config file in that repository
    settings: Mapping[str, Any]          # msbench knobs
    left_out: tuple[str, ...] = ()       # what msbench cannot express, and why


@lru_cache(maxsize=1)
def recipes() -> dict[str, Recipe]:
    data = tomllib.loads(resources.files("workloads").joinpath("recipes.toml").read_text())
    return {name: Recipe(name, entry["source"], entry["config"], dict(entry["settings"]), tuple(entry.get("left_out", ())))
            for name, entry in data.items()}


def recipe_for(workload: str, preset: str, start: str = "recipe") -> Recipe | None:
    """The recipe a cell of `workload` at `preset` starts from (None: MindSpore's defaults). `start` is
    `recipe` or `mindspore-defaults`."""
    if start not in FROM_CHOICES:
        raise ConfigError("--from", start, "|".join(FROM_CHOICES))
    if start != "recipe" or preset != RECIPE_PRESET:
        return None
    return recipes().get(workload)


def recipe_settings(workload: str, where: str) -> dict[str, Any]:
    """A matrix workload's `recipe = true`: its recipe's settings, refused where it has none."""
    found = recipes().get(workload)
    if found is None:
        raise ConfigError("recipe", True, f"a workload with a published recipe ({', '.join(sorted(recipes()))})", where)
    return dict(found.settings)
