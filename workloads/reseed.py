"""Several seeds of one setting on ONE compiled training step: an accuracy run's graph compile (YOLOv8s:
about 10 CPU-seconds, more than its training) is paid once per setting, not once per seed.

A fresh build with seed s starts from the network's initial weights drawn under seed s and from zeroed
optimizer and loss-scaler state; `reseed` puts a built step back exactly there (weights from a network built
again under seed s, every other parameter of the step from a snapshot taken before its first update). The
data order comes from the seed too (the pipeline is built per run). tests/hardware/test_accuracy_reuse.py
checks that a reseeded run's losses equal a freshly built run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msbench.settings import Settings
from workloads.train_step import apply_amp

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Preset, Workload
    from workloads.train_step import TrainStep


@dataclass
class ReusableStep:
    """A built step with the values of its non-weight parameters before any update (optimizer moments,
    step counters, loss scale), and the setting it was built for, less its seed."""

    step: "TrainStep"
    setting: dict[str, Any]
    initial: dict[int, Any] = field(default_factory=dict)    # position in state_parameters -> value

    @classmethod
    def of(cls, step: "TrainStep", settings: Settings) -> "ReusableStep":
        weights = {id(p) for p in step.network.get_parameters()}
        initial = {i: p.asnumpy().copy() for i, p in enumerate(state_parameters(step.cell)) if id(p) not in weights}
        return cls(step, unseeded(settings), initial)


def state_parameters(cell: Any) -> list[Any]:
    """The cell's parameters plus those of plain objects it holds: `ms.amp`'s loss scalers are not cells,
    so a dynamic scale and its window counter are missed by `get_parameters` (and must restart too)."""
    from mindspore import Parameter, nn

    held = [v for obj in vars(cell).values() if hasattr(obj, "__dict__") and not isinstance(obj, (nn.Cell, Parameter))
            for v in vars(obj).values() if isinstance(v, Parameter)]
    return [*cell.get_parameters(), *held]


def unseeded(settings: Settings) -> dict[str, Any]:
    return settings.replace(seed=Settings().seed).non_default()


def reseed(reusable: ReusableStep, workload: "Workload", preset: "Preset", settings: Settings) -> "TrainStep":
    """The reusable step in the state a fresh `build_train_step(workload, preset, settings)` starts in."""
    import mindspore as ms


    if unseeded(settings) != reusable.setting:
        raise ValueError(f"a step built for {reusable.setting} cannot train {unseeded(settings)}")
    step = reusable.step
    ms.set_seed(settings.seed)
    fresh = apply_amp(workload.build_parallel_network(preset, settings), settings).get_parameters()
    for mine, theirs in zip(step.network.get_parameters(), fresh, strict=True):
        if mine.name != theirs.name:
            raise ValueError(f"parameter {mine.name} of the built step meets {theirs.name} of the fresh network")
        ms.ops.assign(mine, ms.Tensor(theirs.asnumpy().copy()))
    for i, param in enumerate(state_parameters(step.cell)):
        if i in reusable.initial:
            ms.ops.assign(param, ms.Tensor(reusable.initial[i].copy()))
    step.cell.set_train(True)
    return step
