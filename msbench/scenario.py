"""Scenarios: what a cell times. `train` (the default) is one optimizer step; `inference` is one call of
the workload's forward network, exported to MindIR and loaded back (MindSpore's own deployment path).

What each scenario refuses is decided by the capability table (hardware.scenarios); here only the names,
which the cell checks.
"""

from __future__ import annotations

from msbench.errors import ConfigError

SCENARIOS = ("train", "inference")
DEFAULT_SCENARIO = "train"


def check_scenario(value: object, where: str = "") -> str:
    if value not in SCENARIOS:
        raise ConfigError("scenario", value, "|".join(SCENARIOS), where)
    return value  # type: ignore[return-value]
