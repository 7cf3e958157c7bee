"""The accuracy phase's plan: which trainings run, in which order, and what an interrupt stops
(msbench/accuracy_phase.py)."""

import threading
from dataclasses import dataclass, field

import pytest

from msbench import accuracy_phase
from msbench.accuracy_phase import Trainings, add_accuracies, lanes_of


@dataclass(frozen=True)
class Cell:
    target: str


@dataclass
class Metrics:
    extra: dict = field(default_factory=dict)


@dataclass
class Row:
    cell_id: str
    group: str | None
    cost: float
    cell: Cell = field(default_factory=lambda: Cell("t"))
    metrics: Metrics = field(default_factory=Metrics)


class Costed:
    accuracy_lanes = 2

    def accuracy_group(self, record: Row) -> str | None:
        return record.group

    def accuracy_cost(self, record: Row) -> float:
        return record.cost


def test_groups_are_trained_once_dearest_first_with_their_baselines_leading():
    rows = [Row("b", "fp32", 60.0), Row("x", "fp16", 150.0), Row("y", "fp32", 60.0), Row("z", None, 0.0),
            Row("w", "fp16", 150.0)]
    baseline = {"b": None, "x": "b", "y": "b", "z": "b", "w": "b"}
    plan = Trainings.of(rows, {"t": Costed()}, lambda r: baseline[r.cell_id])
    assert [[r.cell_id for r in g] for g in plan.groups] == [["x", "w"], ["b", "y"], ["z"]]


def test_the_lanes_are_what_every_target_allows():
    class Plain:
        pass

    assert lanes_of({"a": Costed()}) == 2
    assert lanes_of({"a": Costed(), "b": Plain()}) == 1


def test_an_interrupt_lets_no_lane_start_another_training(monkeypatch):
    """Ctrl-C while one lane trains the first of its group's records: the lane's child is killed, its
    training returns (as a killed child's does), and the group's next record starts no training of its own;
    the interrupt reaches the caller. Two lanes: fp16 [x, w] (dearest) beside fp32 [b]."""
    killed, trained = threading.Event(), []

    class Training(Costed):
        def add_accuracy(self, record: Row, lanes: int = 1) -> None:
            trained.append(record.cell_id)
            if record.cell_id == "x":
                assert killed.wait(30), "the interrupt never killed the training child"

    def finish(record: Row) -> None:
        if record.cell_id == "b":          # the other lane's record is written, then Ctrl-C arrives
            raise KeyboardInterrupt

    monkeypatch.setattr(accuracy_phase, "kill_live_children", killed.set)
    rows = [Row("x", "fp16", 150.0), Row("w", "fp16", 150.0), Row("b", "fp32", 60.0)]
    with pytest.raises(KeyboardInterrupt):
        add_accuracies(rows, {"t": Training()}, lambda r: None, finish, lambda r: None)
    assert sorted(trained) == ["b", "x"]
