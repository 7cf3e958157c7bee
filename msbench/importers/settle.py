"""The knobs an imported config asks for, settled against the settings' rules and the capability table.

A config may hold a value MindSpore accepts and ignores (sequence parallelism without tensor parallelism,
a micro-batch count without a pipeline) or one the device model refuses for this kind of cell (a data
pipeline setting for an LLM composition). msbench never runs a knob that changes nothing, and never drops a
field without a word: such a knob is left at its default and each field that set it is listed as not
modelled with the rule or refusal that applies. Knobs in `fixed` decide what is predicted (layout, batch,
precision, mode): a rule or refusal against one of those is the user's to see, so it is kept (make_settings
then raises, or the prediction refuses, with the reason).
"""

from __future__ import annotations

from typing import Any, Mapping

from hardware.capabilities import Facts, refused_knob
from msbench.errors import ConfigError
from msbench.importers.fields import ConfigFields
from msbench.settings import DEFAULTS, make_settings

FIXED = frozenset({"mode", "sink", "amp_level", "batch_size", "grad_accum", "devices", "tensor_parallel",
                   "pipeline_stages"})


def settle(fields: ConfigFields, knobs: Mapping[str, Any], where: str, kind: str = "model:npu",
           facts: Facts = Facts(), fixed: frozenset[str] = FIXED) -> dict[str, Any]:
    """`knobs` less those a rule or the capability table refuses (recorded in `fields`); raises ConfigError
    naming the config field for a value no knob allows."""
    knobs = dict(knobs)
    for _ in range(len(DEFAULTS) + 1):
        try:
            settings = make_settings(knobs)
        except ConfigError as err:
            if err.rule and err.field in knobs and err.field not in fixed:
                fields.drop_knob(err.field, f"msbench refuses it here ({err.rule})")
                del knobs[err.field]
                continue
            paths = fields.paths_of(err.field) or [err.field]
            raise ConfigError(" + ".join(paths), fields.get(paths[0], err.value), f"a value giving {err.field}: "
                              f"{err.allowed}", where, err.rule) from None
        found = refused_knob(settings, kind, facts)
        if found is None or found[0] not in knobs or found[0] in fixed:
            return knobs
        fields.drop_knob(*found)
        del knobs[found[0]]
    raise AssertionError("settle did not converge")  # pragma: no cover - each pass removes a knob
