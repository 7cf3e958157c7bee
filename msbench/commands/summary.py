"""`msbench list workloads`: one row per workload (built-in, and installed `msbench.workloads` plugins),
sizes computed from the built network, each with where it comes from; then one row per zoo adapter.

Parameter counts come from the `full` network's trainable parameters and forward GFLOPs per sample
(2 x multiply-accumulates of the matrix ops, the convention of published figures) from the compiled forward
graph, counted as `hardware.model.graph.forward_flops` counts it, by `workload_forward_size`: the network is
built and compiled in the extraction child without parameter data. Nothing is typed by hand. A compile
takes seconds, so each row is cached on disk by MindSpore version, the workload's source and its full preset.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, Sequence

from hardware.model.graph import PARSER_SOURCES, mindspore_version, workload_forward_size, workload_sources
from msbench.cache import cache_get, cache_put, content_key, source_hash
from msbench.errors import UserError
from workloads.base import Workload
from workloads.registry import WORKLOADS, ZOOS, get_workload, plugin_names, workload_origin

CACHE_KIND = "workload-summary"
ROW_VERSION = 1              # bump when the row's fields or their meaning change
FULL = "full"


def flops_counter():
    """The project's single FLOP counter (compile-only IR of the forward graph, matrix ops)."""
    return workload_forward_size


def row_sources(name: str) -> list[Path]:
    """The files whose edits can change a row: the workload's package and shared modules (the same list
    the op-graph cache uses), this module, and the FLOP counter with its IR parser."""
    return [*workload_sources(name), Path(__file__), Path(inspect.getfile(flops_counter())), *PARSER_SOURCES]


def input_shape(workload: Workload, preset: Any) -> str:
    """Per-sample shapes of the network's input columns, e.g. `image 3x224x224`."""
    names, _labels = workload.columns(preset)
    batch = workload.synthetic_batch(preset, 1)
    return ", ".join(f"{name} {'x'.join(map(str, array.shape[1:]))}" for name, array in zip(names, batch))


def compute_row(workload: Workload) -> dict[str, Any]:
    """The full network's trainable parameters (BatchNorm moving statistics are not, like torch's buffers) and
    forward FLOPs for one sample: from its config where the workload counts them by formula, else compiled."""
    preset = workload.preset(FULL)
    sized = workload.size_from_config(preset)
    params, flops = sized if sized is not None else flops_counter()(workload.name, FULL)
    return {
        "name": workload.name,
        "family": workload.family,
        "presets": sorted(workload.presets()),
        "input_shape": input_shape(workload, preset),
        "params": params,
        "gflops": round(flops / 1e9, 3),
        "metric": workload.metric_name,
    }


def row_key(workload: Workload) -> str:
    preset = dataclasses.asdict(workload.preset(FULL))

    return content_key(ROW_VERSION, mindspore_version(), workload.name,
                       source_hash(row_sources(workload.name)), preset)


def workload_row(name: str) -> dict[str, Any]:
    """The summary row of one workload, from the cache when nothing it depends on changed."""
    workload = get_workload(name)
    key = row_key(workload)
    row = cache_get(CACHE_KIND, key)
    if row is None:
        row = compute_row(workload)
        cache_put(CACHE_KIND, key, row)
    return row


def zoo_row(zoo: str) -> dict[str, Any]:
    """A zoo adapter stands for every model of its package: no one network to size."""
    return {"name": f"{zoo}:<model>", "family": zoo, "presets": ["full", "tiny"], "input_shape": "",
            "params": None, "gflops": None, "metric": "", "source": workload_origin(f"{zoo}:<model>")}


def list_workloads(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows for `names` (default: every built-in workload, every installed plugin, then the zoo adapters).
    A workload whose module cannot be imported is an error naming it, after the other rows are computed
    and cached, never a silently short list."""
    rows, missing = [], []
    for name in names or [*WORKLOADS, *plugin_names()]:
        try:
            rows.append({**workload_row(name), "source": workload_origin(name)})
        except UserError as err:       # get_workload: unknown name or an import that fails
            missing.append(f"{name} ({err})")
    if missing:
        raise UserError(f"{len(missing)} of {len(rows) + len(missing)} workloads cannot be listed: "
                        + "; ".join(missing))
    return rows if names else [*rows, *(zoo_row(zoo) for zoo in ZOOS)]
