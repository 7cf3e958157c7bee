"""The capability table walked: what each knob value does on each target kind in a given context, the per-kind
column of `msbench list knobs` and the generated knob page, and the values the capability test walks.
The table itself (effects and refusals) is hardware/capabilities.py; this module only reads it.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

from hardware.capabilities import EFFECTS, KINDS, Capability, Facts, check_kind, refusal, value_text
from msbench.errors import ConfigError
from msbench.settings import DEFAULTS, KNOB_META, KNOB_TYPES, FloatRange, Settings, describe_allowed, make_settings

# The settings a knob is walked in by the capability test and `msbench list knobs`: where its values
# are allowed at all (a knob that needs another knob is walked with that one set).
WALK_CONTEXTS: dict[str, tuple[Mapping[str, Any], ...]] = {
    "jit_level": ({"mode": "graph"},),
    "graph_kernel": ({"mode": "graph"},),
    "loss_scale": ({"amp_level": "O2"},),
    "keep_batchnorm_fp32": ({"amp_level": "O2"}, {"amp_level": "O3"}),
    "cache": ({"data_format": "mindrecord"},),
    "sink": ({"mode": "graph"},),
    "sink_size": ({"mode": "graph", "sink": True},),
    "lr_scaling": ({}, {"devices": 8}),
    "tensor_parallel": ({"devices": 8, "parallel_mode": "semi_auto"},),
    "pipeline_stages": ({"devices": 8, "parallel_mode": "semi_auto"},),   # p > 1 also needs micro_batches >= p
    "micro_batches": ({"devices": 8, "parallel_mode": "semi_auto", "pipeline_stages": 2, "micro_batches": 2},),
    "sequence_parallel": ({"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 2},),
    "optimizer_shard": ({"devices": 8, "parallel_mode": "semi_auto"},),
    "parallel_mode": ({"devices": 8},),
    "flash_attention": ({"amp_level": "O2"},),
    "shared_mem": ({"python_multiprocessing": True},),
    "drop_remainder": ({"mode": "graph"}, {}),
}

# Representative values of integer knobs (boundaries, the default, a typical value).
WALK_VALUES: dict[str, tuple[Any, ...]] = {
    "batch_size": (None, 1, 32, (1 << 20) - 1),
    "grad_accum": (1, 2, 1024),
    "workers": (1, 2, 8, 128),
    "prefetch": (0, 1, 16, 1024),
    "sink_size": (-1, 1, 4),
    "seed": (0, 1, 2**31 - 1),
    "tensor_parallel": (1, 2, 8, 4096),
    "pipeline_stages": (1, 2, 8, 4096),
    "micro_batches": (1, 4, 32, (1 << 20) - 1),
    "max_device_memory": (None, 0.5, 16.0, 1024.0),
}


def walk_values(knob: str) -> tuple[Any, ...]:
    """Every value of a knob with a finite set; boundaries and typical values of an integer range."""
    if knob in WALK_VALUES:
        return WALK_VALUES[knob]
    allowed = KNOB_META[knob]["allowed"]
    return tuple(allowed) if not isinstance(allowed, range) else (allowed.start, allowed.stop - 1)


def walk_contexts(knob: str) -> tuple[Mapping[str, Any], ...]:
    return WALK_CONTEXTS.get(knob, ({},))


def capability(knob: str, value: Any, kind: str, context: Mapping[str, Any] | None = None,
               facts: Facts = Facts()) -> Capability:
    """What `knob=value` does on `kind` in `context` (other knobs; default: the knob's first walk context)."""
    check_kind(kind)
    context = dict(walk_contexts(knob)[0] if context is None else context)
    try:
        settings = make_settings({**context, knob: value})
    except ConfigError as err:
        return Capability("refused", f"invalid: {err.rule or err.allowed}")
    reason = refusal(settings, kind, facts)
    if reason:
        return Capability("refused", reason)
    effect = EFFECTS[knob][kind]
    if value == DEFAULTS[knob]:
        return Capability("default", effect.what)
    return Capability(effect.how, effect.what)


def summary(knob: str, kind: str) -> str:
    """One cell of `msbench list knobs`' per-target column: how the knob acts, and the values refused there
    (beyond those the settings rules forbid everywhere)."""
    effect = EFFECTS[knob][kind]
    if effect.how == "refused":
        return "refused"
    refused = sorted({value_text(v) for ctx in walk_contexts(knob) for v in walk_values(knob)
                      if v != DEFAULTS[knob] and _refused_here(capability(knob, v, kind, ctx))})
    return effect.how + (f" (refused: {', '.join(refused)})" if refused else "")


def _refused_here(cap: Capability) -> bool:
    return cap.status == "refused" and not cap.text.startswith("invalid")


def knob_table() -> list[dict[str, Any]]:
    """The knob table printed by `msbench list knobs`: one column per target kind from the capability
    table (applied / modelled, with the values that kind refuses)."""
    rows = []
    for f in fields(Settings):
        allowed = f.metadata["allowed"]
        rows.append({
            "name": f.name,
            "type": KNOB_TYPES[f.name].__name__,
            "default": f.default,
            "allowed": (describe_allowed(allowed) if isinstance(allowed, (range, FloatRange)) else list(allowed)),
            "help": f.metadata["help"],
            "targets": {kind: summary(f.name, kind) for kind in KINDS},
        })
    return rows
