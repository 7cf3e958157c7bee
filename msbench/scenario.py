"""Scenarios: what a cell times. `train` (the default) is one optimizer step; `inference` is one call of
the workload's forward network, exported to MindIR and loaded back (MindSpore's own deployment path).

Under inference only the knobs that change the forward network or how it is compiled mean anything;
every other knob set away from its default is refused with the reason, never silently ignored.
"""

from __future__ import annotations

from msbench.errors import ConfigError
from msbench.settings import DEFAULTS, Settings

SCENARIOS = ("train", "inference")
DEFAULT_SCENARIO = "train"

# Knobs that still act on an exported forward network: the execution mode and compile level it is loaded
# under, the precision it was exported at, the batch it is called with, the seed of its initial weights.
INFERENCE_KNOBS = ("mode", "jit_level", "graph_kernel", "amp_level", "keep_batchnorm_fp32", "batch_size", "seed")


def check_scenario(value: object, where: str = "") -> str:
    if value not in SCENARIOS:
        raise ConfigError("scenario", value, "|".join(SCENARIOS), where)
    return value  # type: ignore[return-value]


def scenario_refusal(settings: Settings, scenario: str) -> str | None:
    """Why `settings` cannot run under `scenario` (None: they can). Training knobs (optimizer, loss
    scaling, accumulation, recompute, the data pipeline, data parallelism ...) do nothing to a forward call."""
    if scenario == DEFAULT_SCENARIO:
        return None
    moved = sorted(k for k, v in settings.non_default().items() if k not in INFERENCE_KNOBS)
    if not moved:
        return None
    values = ", ".join(f"{k}={settings.to_dict()[k]!r}" for k in moved)
    return (f"scenario=inference times one forward call of the exported network, so {values} would change "
            f"nothing (training or data-pipeline knobs); allowed under inference: {', '.join(INFERENCE_KNOBS)} "
            f"(the rest at their defaults: {', '.join(f'{k}={DEFAULTS[k]!r}' for k in moved)})")
