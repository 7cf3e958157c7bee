"""The grammar of a hardware-profile file: TOML tables parsed strictly into typed frozen dataclasses. The
schema is the dataclasses themselves (hardware/model/profile.py), read through their type hints: an unknown,
missing or ill-typed key is a ConfigError naming the file, the key and what is allowed. Efficiency curves,
`[threshold, efficiency]` rows, are the one value type beyond numbers, text and tables.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Any, Mapping

from msbench.errors import ConfigError


@dataclass(frozen=True)
class EfficiencyTable:
    """`[[threshold, efficiency], ...]`: the efficiency of the first row whose threshold <= x."""

    rows: tuple[tuple[float, float], ...]

    def at(self, x: float) -> float:
        for threshold, eff in self.rows:
            if x >= threshold:
                return eff
        return self.rows[-1][1]


ALLOWED_TEXT = {"kind": ("npu", "cpu"), "dtype": ("fp32", "fp16", "bf16"), "matrix_fp32_as": ("fp32", "fp16"), "algorithm": ("ring", "mesh")}


def parse_section(cls: type, table: Any, where: str, prefix: str, skip: tuple[str, ...] = ()) -> Any:
    """Build dataclass `cls` from a TOML table, refusing unknown and missing keys."""
    if not isinstance(table, Mapping):
        raise ConfigError(prefix or "profile", table, "a table", where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls) if f.name not in skip]
    optional = {f.name for f in fields(cls) if f.default is not MISSING}
    unknown = sorted(set(table) - set(names) - set(skip))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}", table[unknown[0]], "keys " + ", ".join(names), where,
                          rule="unknown key")
    values = {}
    for name in names:
        key = f"{prefix}{name}"
        if name not in table:
            if name in optional:
                continue
            raise ConfigError(key, None, "required key", where, rule="missing key")
        values[name] = parse_value(hints[name], table[name], where, key)
    return cls(**values)


# Values a prediction divides by (or scales a time by): a zero there is a ZeroDivisionError or a free
# resource, never a meaningful profile. `0 = not supported` keys (tflops_bf16, cube tflops_fp32) stay >= 0.
POSITIVE = {("cube", "cores"), ("cube", "ghz"), ("cube", "tile"), ("cube", "tflops_fp16"), ("vector", "cores"),
            ("vector", "tflops_fp16"), ("vector", "tflops_fp32"), ("memory", "gib"), ("memory", "usable_gib"),
            ("memory", "gbps"), ("memory", "l2_gbps"), ("host", "cores_per_device"), ("host", "core_speed"),
            ("host", "link_gbps"), ("comm.levels", "gbps"), ("comm", "bucket_mib"), ("comm", "efficiency")}


def must_be_positive(key: str) -> bool:
    section, _, name = re.sub(r"\[\d+\]", "", key).rpartition(".")
    return (section, name) in POSITIVE


def parse_value(hint: Any, value: Any, where: str, key: str) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):      # `X | None`: an optional key
        hint = next(h for h in typing.get_args(hint) if h is not type(None))
    if hint is EfficiencyTable:
        return parse_efficiency(value, where, key)
    if is_dataclass(hint):
        return parse_section(hint, value, where, key + ".")
    if typing.get_origin(hint) is tuple:      # tuple[Level, ...]: an array of tables
        if not isinstance(value, list) or not value:
            raise ConfigError(key, value, "a non-empty array of tables", where)
        return tuple(parse_value(typing.get_args(hint)[0], v, where, f"{key}[{i}]") for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, value, "true|false", where)
        return value
    positive = must_be_positive(key)
    bound = "> 0" if positive else ">= 0"
    if hint in (int, float):
        number = (int,) if hint is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, number) or not math.isfinite(value) \
                or value < 0 or (positive and value == 0):
            raise ConfigError(key, value, f"{'an integer' if hint is int else 'a number'} {bound} (finite)", where)
        return hint(value)
    if not isinstance(value, str):
        raise ConfigError(key, value, "a string", where)
    allowed = ALLOWED_TEXT.get(key.rsplit(".", 1)[-1].split("[")[0])
    if allowed and value not in allowed:
        raise ConfigError(key, value, "|".join(allowed), where)
    return value


def parse_efficiency(value: Any, where: str, key: str) -> EfficiencyTable:
    allowed = "[[threshold, efficiency], ...] with thresholds descending, the last 0, efficiencies in (0, 1]"
    if not isinstance(value, list) or not value:
        raise ConfigError(key, value, allowed, where)
    rows = []
    for row in value:
        ok = (isinstance(row, list) and len(row) == 2
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row))
        if not ok or not 0 < row[1] <= 1 or row[0] < 0:
            raise ConfigError(key, row, allowed, where)
        rows.append((float(row[0]), float(row[1])))
    thresholds = [t for t, _ in rows]
    if thresholds != sorted(thresholds, reverse=True) or len(set(thresholds)) != len(thresholds):
        raise ConfigError(key, value, allowed, where, rule="thresholds must descend")
    if thresholds[-1] != 0:
        raise ConfigError(key, value, allowed, where, rule="the last threshold must be 0")
    return EfficiencyTable(tuple(rows))
