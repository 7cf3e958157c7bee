"""The accuracy phase's plan: which trainings run, in which order (msbench/accuracy_phase.py)."""

from dataclasses import dataclass, field

from msbench.accuracy_phase import Trainings, lanes_of


@dataclass(frozen=True)
class Cell:
    target: str


@dataclass
class Row:
    cell_id: str
    group: str | None
    cost: float
    cell: Cell = field(default_factory=lambda: Cell("t"))


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
