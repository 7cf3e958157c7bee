"""What a scenario refuses. Under inference only the knobs that change the forward network or how it is
compiled mean anything (the capability table's `FORWARD` knobs); every other knob set away from its default
is refused with the reason, never silently ignored. The scenario names live in msbench.scenario (the cell
checks them below this layer)."""

from __future__ import annotations

from hardware.capabilities import INFERENCE_KNOBS
from msbench.scenario import DEFAULT_SCENARIO
from msbench.settings import DEFAULTS, Settings


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
