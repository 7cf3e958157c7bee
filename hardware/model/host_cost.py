"""Per-sample host cost of a workload's real `mindspore.dataset` pipeline, measured on this host.

The device model scales it to a profile's host (`host_time.py`); here it is measured once per
content key (MindSpore version, workload source, preset and overrides, data format) by
iterating `workload.make_dataset(...)` with one worker in a child process, and cached on disk.
The result records this host's cores and CPU model, the reference the profiles scale from.

Robustness: the workloads' sources render and encode each sample once, then serve the stored bytes
(as a reader of files would), so the whole first epoch (generation, pipeline start-up, MindRecord
open) is excluded; the figure is the median over a few timed segments of whole batches of the next
epoch, each at least `MIN_SAMPLES` samples, with prefetch 1 so a queue filled while idle cannot
flatter the timing. The split is cut to the timed samples: the cost per sample does not depend on
its length, and BERT's full split took 80 s just to write as MindRecord.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from hardware.model.extract import ChildError, run_child
from hardware.model.graph import check_preset, mindspore_version, workload_sources
from msbench.cache import cached, content_key, positive_finite, source_hash
from msbench.host_share import exclusive_host
from msbench.settings import Settings

CACHE_KIND = "host_cost"
SCHEMA = 2                  # bump when HostCost's fields change (editing this file changes the key)
REPEATS = 5                 # timed segments; the median is reported
MIN_SAMPLES = 64            # samples per timed segment (whole batches: one ResNet-50 batch of 256)
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class HostCost:
    """The measured host cost of one cell's data pipeline on this host (one worker)."""

    seconds_per_sample: float          # median over the timed segments
    bytes_per_sample: int              # bytes of one sample as the pipeline yields it (host -> device copy)
    host_cores: int                    # logical CPUs of the measuring host
    cpu_model: str                     # e.g. "AMD EPYC 9R14"
    batch_size: int
    segments_s_per_sample: tuple[float, ...]   # every timed segment, for the spread
    samples_timed: int
    key: str = ""

    @property
    def per_sample_s(self) -> float:
        """The name `hardware.model.host_time.HostCostLike` reads."""
        return self.seconds_per_sample

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HostCost":
        return cls(**{**data, "segments_s_per_sample": tuple(data["segments_s_per_sample"])})


def host_cost_key(workload: str, preset: str, overrides: Mapping[str, Any], settings: Settings) -> str:
    """One measurement per (workload, preset, data format): a per-sample cost, taken at the preset's batch,
    so that every cell of a workload is predicted from the same measurement, not from several taken at
    different moments of a noisy host. This file's source is in the key: a changed probe re-measures."""
    return content_key("host_cost", SCHEMA, mindspore_version(), source_hash(workload_sources(workload)),
                       source_hash([Path(__file__)]), workload, preset, dict(overrides), settings.data_format)


def host_cost(workload: str, preset: str, overrides: Mapping[str, Any] | None, settings: Settings) -> HostCost:
    """The cell's per-sample host cost (cached; cold: one bounded measurement in a child process)."""
    overrides = dict(overrides or {})
    key = host_cost_key(workload, preset, overrides, settings)

    def probe() -> dict[str, Any]:
        check_preset(workload, preset, overrides)
        request = {"workload": workload, "preset": preset, "overrides": overrides,
                   "data_format": settings.data_format}
        try:
            with exclusive_host():                   # a timing: alone on the host (msbench.host_share)
                measured = run_child("hardware.model.host_cost", request, TIMEOUT_S)
        except ChildError as err:
            raise RuntimeError(f"host-cost measurement of {workload}/{preset} {err}") from err
        return {**measured, "key": key}

    entry, _ = cached(CACHE_KIND, key, probe, validate=valid_entry)
    return HostCost.from_dict(entry)


def valid_entry(entry: dict[str, Any]) -> bool:
    """A cache entry that parses and whose costs are finite and > 0 (else it is measured again)."""
    HostCost.from_dict(entry)
    return positive_finite("seconds_per_sample", "bytes_per_sample")(entry)


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo, else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class ProbePlan:
    """How the probe reads a split: one untimed epoch, then `repeats` segments of `per_segment` batches."""

    batch: int
    per_segment: int
    repeats: int
    train_samples: int          # the split, cut to the timed samples

    @classmethod
    def for_split(cls, train_samples: int, batch: int) -> "ProbePlan":
        per_segment = max(1, -(-MIN_SAMPLES // batch))
        return cls(batch, per_segment, REPEATS, min(train_samples, REPEATS * per_segment * batch))

    @property
    def epoch_batches(self) -> int:
        return max(1, self.train_samples // self.batch)

    @property
    def epochs(self) -> int:
        """The untimed first epoch plus enough epochs for the timed batches."""
        return 1 + -(-self.repeats * self.per_segment // self.epoch_batches)


def measure(request: Mapping[str, Any]) -> dict[str, Any]:
    """Iterate the real pipeline (child side): one untimed epoch, then `REPEATS` timed segments."""
    from msbench.settings import make_settings
    from workloads.registry import get_workload

    wl = get_workload(request["workload"])
    preset = wl.preset(request["preset"], request["overrides"])
    batch = preset.batch_size
    settings = make_settings({"data_format": request["data_format"], "workers": 1, "prefetch": 1, "seed": 1})
    plan = ProbePlan.for_split(preset.train_samples, batch)
    if plan.train_samples < preset.train_samples:
        preset = wl.preset(request["preset"], {**request["overrides"], "train_samples": plan.train_samples})
    dataset = wl.make_dataset(preset, "train", settings, batch, workdir=Path(request["dump_dir"]))
    iterator = dataset.repeat(plan.epochs).create_tuple_iterator(output_numpy=True, num_epochs=1)
    first = next(iterator)
    bytes_per_sample = sum(column.nbytes for column in first) // batch
    for _ in range(plan.epoch_batches - 1):                         # the rest of the untimed epoch
        next(iterator)
    segments = []
    for _ in range(plan.repeats):
        start = time.perf_counter()
        for _ in range(plan.per_segment):
            next(iterator)
        segments.append((time.perf_counter() - start) / (plan.per_segment * batch))
    return {"seconds_per_sample": statistics.median(segments), "bytes_per_sample": int(bytes_per_sample),
            "host_cores": os.cpu_count() or 1, "cpu_model": cpu_model(), "batch_size": batch,
            "segments_s_per_sample": segments, "samples_timed": plan.repeats * plan.per_segment * batch}


def main() -> int:
    import json

    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    request = json.loads(sys.stdin.read())
    Path(request["out"]).write_text(json.dumps(measure(request), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
