"""The real target's own configuration: which device, and how hard to measure.

Kept apart from Settings (which say *what* is trained) because these say *how* it is measured;
the environment can tighten them (tests and CI use a small time budget) without changing cell ids.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from msbench.errors import ConfigError

DEVICES = ("cpu", "ascend", "gpu")
ENV_PREFIX = "MSBENCH_MEASURE_"    # e.g. MSBENCH_MEASURE_TIME_BUDGET_S=5


@dataclass(frozen=True, kw_only=True)
class MeasureConfig:
    """The measurement protocol's parameters (see measure.py)."""

    warmup_steps: int = 2          # after the first (compile) step, not measured
    min_steps: int = 5             # measured steps before the stopping rule is checked
    max_steps: int = 1000        # high enough that the CI target or the time budget decides
    ci_target: float = 0.02        # stop when the relative 95% CI half-width of the median is below this
    time_budget_s: float = 30.0    # ... or when measuring has taken this long (per process)
    memory_profile_steps: int = 2  # steps run under the profiler for the CPU pool peak (0 = skip)
    # Across fresh processes (each compiles and warms up on its own), see measure.process_stop_reason:
    processes: int = 3             # processes always run; the record's median and interval are over them
    max_processes: int = 6         # more are added while the processes' interval is wider than below
    process_ci_target: float = 0.03  # relative 95% t-interval half-width of the process medians

    def __post_init__(self) -> None:
        for name in ("warmup_steps", "memory_profile_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "an integer >= 0", "MeasureConfig")
        if not 2 <= self.min_steps <= self.max_steps:
            raise ConfigError("min_steps", self.min_steps, f"2..max_steps ({self.max_steps})", "MeasureConfig")
        for name in ("ci_target", "process_ci_target"):
            if not 0 < getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "a fraction in (0, 1)", "MeasureConfig")
        if not 1 <= self.processes <= self.max_processes:
            raise ConfigError("processes", self.processes, f"1..max_processes ({self.max_processes})",
                              "MeasureConfig")
        if self.time_budget_s <= 0:
            raise ConfigError("time_budget_s", self.time_budget_s, "seconds > 0", "MeasureConfig")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "MeasureConfig":
        """Defaults, overridden by `MSBENCH_MEASURE_<FIELD>` variables (they reach the isolated child)."""
        environ = os.environ if environ is None else environ
        changes: dict[str, object] = {}
        for f in fields(cls):
            text = environ.get(ENV_PREFIX + f.name.upper())
            if text is None:
                continue
            kind = int if f.type in ("int", int) else float
            try:
                changes[f.name] = kind(text)
            except ValueError:
                raise ConfigError(ENV_PREFIX + f.name.upper(), text, f"a {kind.__name__}") from None
        return replace(cls(), **changes)


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise ConfigError("device", device, "|".join(DEVICES), "mindspore target")
    return device
