"""Compile a training step without data, in the extraction child: the network, optimizer and batch are built
with shapes and dtypes only (no parameter data drawn, filled or copied), and compiled on the CPU backend for
one device. The child (`hardware.model.extract`) has set MindSpore's IR dump environment before any of
this imports MindSpore, so every MindSpore import here is inside a function.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


def compile_step(workload: Any, preset: Any, settings: Any) -> dict[str, Any]:
    """`workload`'s training step (the step builder's contract: its network, loss, columns, synthetic
    batch and recompute blocks) compiled on the CPU backend for one device, without data (shape_only)."""
    import mindspore as ms

    # Inside: importing a workload imports MindSpore, which must come after answer() set dump_env.
    from hardware.model.cpu_optimizers import PATCHED_OPTIMIZERS, use_cpu_compositions
    from workloads.train_step import build_train_step

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    step = built_step(lambda: build_train_step(workload, preset, settings))
    with shape_only():
        if settings.optimizer in PATCHED_OPTIMIZERS:          # no CPU kernel: the same update on CPU primitives
            use_cpu_compositions(step.optimizer)
        # One call of the step cell is one optimizer update over all micro-batches, stacked on axis 0.
        arrays = workload.synthetic_batch(preset, step.step_batch)
        step.cell.compile(*[unfilled_tensor(a) for a in arrays])
    return {"batch_size": step.micro_batch, "grad_accum": step.grad_accum,
            "recomputed_blocks": step.recomputed_blocks,
            "trainable": sorted(p.name for p in step.network.trainable_params())}


def built_step(build: Any) -> Any:
    """The step built without parameter data (shape_only); a network that reads a parameter's value while
    it is built (mindcv's ConvNeXt scales its head's weight in its constructor, which raises "is
    uninitialized" without data) is built again with its values, the compile still filling nothing."""
    try:
        with shape_only():
            return build()
    except RuntimeError as err:
        if "is uninitialized" not in str(err):
            raise
    return build()


@contextlib.contextmanager
def shape_only() -> Iterator[None]:
    """A compile reads shapes and dtypes, never values, and the IR dump is written before `Cell.compile`
    fills the parameters (mindspore/graph/api.py: `init_parameters_data` follows the graph compile). So the
    parameters and optimizer states are built without data (MindSpore's `no_init_parameters`) and never
    filled: at Llama 2 70B they were GBs of pages touched per compile, most of its system time."""
    from mindspore import nn
    from mindspore.nn.utils import no_init_parameters

    fill = nn.Cell.init_parameters_data
    nn.Cell.init_parameters_data = lambda self, auto_parallel_mode=False: {}
    try:
        with no_init_parameters():
            yield
    finally:
        nn.Cell.init_parameters_data = fill


def unfilled_tensor(array: Any) -> Any:
    """A step input of `array`'s shape and dtype with no data of its own (a lazily initialised Tensor that
    the compile never materialises), so a large synthetic batch is never copied into MindSpore."""
    import numpy as np
    import mindspore as ms
    from mindspore.common.initializer import Zero

    dtype = ms.from_numpy(np.zeros(0, np.asarray(array).dtype)).dtype
    return ms.Tensor(shape=np.shape(array), dtype=dtype, init=Zero())
