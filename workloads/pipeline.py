"""One real mindspore.dataset pipeline for every workload, honouring the data-pipeline knobs.

A workload supplies a random-access source of numpy samples and its map operations; this module
applies `data_format` (generator or MindRecord), `cache`, `workers`, `prefetch`,
`python_multiprocessing` with `shared_mem`, `augment_device`, sharding by rank and batching with
`drop_remainder`, so the knobs mean the same thing for every family.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from msbench.settings import Settings
from workloads.train_step import step_batch_size

CACHE_SESSION_ENV = "MSBENCH_DATASET_CACHE_SESSION"


class SampleSource(Protocol):
    """Random access to deterministic samples: `source[i]` is a tuple of numpy arrays, one per column."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]: ...


@dataclass(frozen=True)
class MapStage:
    """One `.map` of the pipeline: operations applied to some columns (C++ vision ops or Python callables)."""

    operations: Sequence[Any]
    input_columns: list[str]
    output_columns: list[str] | None = None


@dataclass(frozen=True)
class PipelineSpec:
    source: SampleSource
    columns: list[str]
    source_key: str                      # content key of the source (for the MindRecord file name)
    stages: list[MapStage] = field(default_factory=list)
    shuffle: bool = True
    per_batch: Callable | None = None    # optional per-batch map (e.g. YOLO target padding)
    project: list[str] | None = None     # final column order (maps that add columns insert them mid-row)


MINDRECORD_TYPES = {np.dtype("int32"): "int32", np.dtype("int64"): "int64",
                    np.dtype("float32"): "float32", np.dtype("float64"): "float64"}


def mindrecord_schema(columns: Sequence[str], sample: tuple[np.ndarray, ...]) -> dict[str, dict[str, Any]]:
    """Schema from the first sample: 1-D uint8 columns are encoded files (bytes); scalars stay scalars;
    arrays keep their inner dimensions and may vary in the first (e.g. a box list)."""
    schema: dict[str, dict[str, Any]] = {}
    for name, value in zip(columns, sample):
        value = np.asarray(value)
        if value.dtype == np.uint8 and value.ndim == 1:
            schema[name] = {"type": "bytes"}
        elif value.dtype not in MINDRECORD_TYPES:
            raise TypeError(f"column {name!r} has dtype {value.dtype}; MindRecord stores "
                            f"{', '.join(map(str, MINDRECORD_TYPES))} or 1-D uint8 bytes: convert it in the source")
        elif value.ndim == 0:
            schema[name] = {"type": MINDRECORD_TYPES[value.dtype]}
        else:
            schema[name] = {"type": MINDRECORD_TYPES[value.dtype], "shape": [-1, *value.shape[1:]]}
    return schema


def mindrecord_row(schema: dict[str, dict[str, Any]], columns: Sequence[str], sample: tuple[np.ndarray, ...]) -> dict[str, Any]:
    row = {}
    for name, value in zip(columns, sample):
        value = np.asarray(value)
        if schema[name]["type"] == "bytes":
            row[name] = value.tobytes()
        else:  # the writer takes scalars as Python numbers, arrays as arrays
            row[name] = value.item() if "shape" not in schema[name] else value
    return row


def mindrecord_path(spec: PipelineSpec, workdir: Path) -> Path:
    """Write the source once as MindRecord (keyed by content) and return its path.

    MindRecord refuses renamed files (its index names the file), so the file is written under its final
    name inside a private temporary directory, which is then renamed into place: concurrent writers
    never see a half-written file, and the loser of a race drops its copy.
    """
    from mindspore.mindrecord import FileWriter

    key = hashlib.sha256(spec.source_key.encode()).hexdigest()[:16]
    final_dir = workdir / "mindrecord" / key
    path = final_dir / "data.mindrecord"
    if path.exists() and Path(f"{path}.db").exists():
        return path
    tmp_dir = workdir / "mindrecord" / f".{key}.{os.getpid()}.tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    schema = mindrecord_schema(spec.columns, spec.source[0])
    writer = FileWriter(str(tmp_dir / path.name), shard_num=1, overwrite=True)
    writer.add_schema(schema, "msbench")
    rows = []
    for i in range(len(spec.source)):
        rows.append(mindrecord_row(schema, spec.columns, spec.source[i]))
        if len(rows) == 256:
            writer.write_raw_data(rows)
            rows = []
    if rows:
        writer.write_raw_data(rows)
    writer.commit()
    try:
        os.rename(tmp_dir, final_dir)
    except OSError:                      # another process finished first: use its file
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return path


# The deterministic vision ops of the workloads' pipelines that MindSpore 2.10 runs with `.device("Ascend")`
# (DVPP). HWC2CHW and CenterCrop have no `.device` in 2.10 and the random ops stay on the host too.
DEVICE_VISION_OPS = ("Decode", "Resize", "Normalize")


def ragged_last_batch(preset: Any, settings: Settings) -> bool:
    """Whether an epoch of the training split ends in a partial batch on each rank (the rank's shard is
    the split's ceiling share, as MindSpore's distributed sampler pads it): what drop_remainder drops."""
    return math.ceil(preset.train_samples / settings.devices) % step_batch_size(preset, settings) != 0


def is_python_op(op: Any) -> bool:
    """A Python callable (not one of MindSpore's C++ TensorOperations): what python_multiprocessing moves."""
    from mindspore.dataset.transforms.transforms import TensorOperation

    return callable(op) and not isinstance(op, TensorOperation)


def device_vision_ops(stages: Sequence[MapStage]) -> list[Any]:
    """The pipeline's ops that `augment_device=ascend` places on the device."""
    return [op for stage in stages for op in stage.operations if type(op).__name__ in DEVICE_VISION_OPS]


def place_vision_ops(stages: Sequence[MapStage], device: str) -> None:
    """`augment_device=ascend`: the deterministic vision ops run on the device; refuse a pipeline without one."""
    if device == "cpu":
        return
    ops = device_vision_ops(stages)
    if not ops:
        raise ValueError("augment_device=ascend: this pipeline has no deterministic vision op "
                         f"({'/'.join(DEVICE_VISION_OPS)}) to move to the device")
    for op in ops:
        op.device("Ascend")


def build_pipeline(spec: PipelineSpec, settings: Settings, batch_size: int, *, rank: int = 0, world: int = 1,
                   workdir: Path | None = None):
    """The batched dataset for `spec` under the cell's data knobs."""
    import mindspore.dataset as ds

    if settings.prefetch > 0:
        ds.config.set_prefetch_size(settings.prefetch)
    ds.config.set_seed(settings.seed)
    processes = settings.python_multiprocessing
    if processes:
        python_stages = any(is_python_op(op) for stage in spec.stages for op in stage.operations)
        if settings.data_format == "mindrecord" and not python_stages and spec.per_batch is None:
            raise ValueError("python_multiprocessing=true: this MindRecord pipeline has no Python stage (its "
                             "source and maps are C++ operations), so process workers would change nothing")
        ds.config.set_enable_shared_mem(settings.shared_mem)
    place_vision_ops(spec.stages, settings.augment_device)
    shard = {"num_shards": world, "shard_id": rank} if world > 1 else {}
    if settings.data_format == "mindrecord":
        path = mindrecord_path(spec, Path(workdir or ".msbench-data"))
        cache = None
        if settings.cache:
            session = os.environ.get(CACHE_SESSION_ENV)
            if not session:
                raise RuntimeError(f"cache=true needs a running dataset cache server (env {CACHE_SESSION_ENV})")
            cache = ds.DatasetCache(session_id=int(session), size=0, spilling=False)
        data = ds.MindDataset(str(path), columns_list=spec.columns, num_parallel_workers=settings.workers,
                              shuffle=spec.shuffle, cache=cache, **shard)
    else:
        data = ds.GeneratorDataset(spec.source, column_names=spec.columns, shuffle=spec.shuffle,
                                   num_parallel_workers=settings.workers, python_multiprocessing=processes, **shard)
    for stage in spec.stages:
        python = processes and any(is_python_op(op) for op in stage.operations)
        data = data.map(operations=list(stage.operations), input_columns=stage.input_columns,
                        output_columns=stage.output_columns, num_parallel_workers=settings.workers,
                        python_multiprocessing=python)
    if spec.project is not None:
        data = data.project(spec.project)
    drop = settings.drop_remainder
    if spec.per_batch is not None:
        return data.batch(batch_size, drop_remainder=drop, per_batch_map=spec.per_batch,
                          num_parallel_workers=settings.workers, python_multiprocessing=processes)
    return data.batch(batch_size, drop_remainder=drop, num_parallel_workers=settings.workers)
