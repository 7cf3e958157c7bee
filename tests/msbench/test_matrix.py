import itertools
import json
import subprocess
import sys
import textwrap

import pytest

from msbench.cell import Cell
from msbench.errors import ConfigError, UserError
from msbench.matrix import pairwise_points
from msbench.matrix_file import load_matrix
from msbench.settings import make_settings


def write(tmp_path, text, name="m.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASIC = """
    name = "t"
    targets = ["model:ascend910b"]
    strategy = "{strategy}"
    [[workloads]]
    name = "resnet50"
    preset = "tiny"
    [[workloads]]
    name = "bert-base"
    preset = "tiny"
    set = {{batch_size = 8}}
    [base]
    mode = "graph"
    [axes]
    amp_level = ["O0", "O2", "O3"]
    recompute = ["none", "full"]
    sink = [false, true]
"""


def test_grid_is_the_full_product_per_workload(tmp_path):
    exp = load_matrix(write(tmp_path, BASIC.format(strategy="grid"))).expand()
    assert exp.counts() == {"total": 24, "ok": 24}
    bert = [e.cell for e in exp.entries if e.cell.workload == "bert-base"]
    assert all(c.settings.batch_size == 8 for c in bert)


def test_ofat_varies_one_knob_at_a_time_around_the_base(tmp_path):
    exp = load_matrix(write(tmp_path, BASIC.format(strategy="ofat"))).expand()
    labels = sorted({e.cell.label for e in exp.entries})
    assert labels == ["amp_level=O2", "amp_level=O3", "base", "recompute=full", "sink=true"]
    assert sum(e.baseline for e in exp.entries) == 2


def test_pairwise_covers_every_pair_of_values():
    axes = {"a": [1, 2, 3], "b": ["x", "y"], "c": [True, False], "d": [0, 5, 9]}
    points = pairwise_points(axes)
    assert len(points) < 3 * 2 * 2 * 3
    for k1, k2 in itertools.combinations(axes, 2):
        seen = {(p[k1], p[k2]) for p in points}
        assert seen == set(itertools.product(axes[k1], axes[k2]))


def test_invalid_cells_are_listed_with_their_rule(tmp_path):
    text = BASIC.format(strategy="grid").replace('mode = "graph"', 'mode = "pynative"')
    exp = load_matrix(write(tmp_path, text)).expand()
    invalid = [e for e in exp.entries if e.status == "invalid"]
    assert len(invalid) == 12 and all("dataset sink needs mode=graph" in e.reason for e in invalid)
    assert len({e.cell.id for e in exp.entries}) == 24


def test_exclude_and_include_rules(tmp_path):
    text = BASIC.format(strategy="ofat") + textwrap.dedent("""
        [[exclude]]
        workload = "bert-base"
        amp_level = "O3"
        [[include]]
        workload = "resnet50"
        amp_level = "O2"
        loss_scale = "dynamic"
    """)
    exp = load_matrix(write(tmp_path, text)).expand()
    excluded = [e for e in exp.entries if e.status == "excluded"]
    assert [(e.cell.workload, e.cell.settings.amp_level) for e in excluded] == [("bert-base", "O3")]
    assert any(e.cell.label == "amp_level=O2,loss_scale=dynamic" and e.cell.workload == "resnet50"
               for e in exp.entries)


def test_cell_ids_are_stable_and_key_order_free():
    a = Cell(workload="resnet50", settings=make_settings({"mode": "graph", "amp_level": "O2"}))
    b = Cell(workload="resnet50", settings=make_settings({"amp_level": "O2", "mode": "graph"}))
    assert a.id == b.id and len(a.id) == 12
    assert Cell(workload="resnet50").id != a.id


@pytest.mark.slow
def test_ids_agree_across_processes(tmp_path):
    path = write(tmp_path, BASIC.format(strategy="grid"))
    runs = [subprocess.run([sys.executable, "-m", "msbench.cli", "matrix", "show", str(path), "--json"],
                           capture_output=True, text=True, check=True).stdout for _ in range(2)]
    ids = [[c["id"] for c in json.loads(r)["cells"]] for r in runs]
    assert ids[0] == ids[1] and len(set(ids[0])) == 24


@pytest.mark.parametrize("text, fragment", [
    ('name = "x"\n[[workloads]]\nname = "resnet50"\n[base]\ncolour = 1\n', "knob='colour'"),
    ('name = "x"\n[[workloads]]\nname = "resnet50"\n[axes]\nbatch_size = [8, -1]\n', "batch_size=-1"),
    ('name = "x"\n[[workloads]]\nname = "alexnet"\n', "workload='alexnet'"),
    ('name = "x"\n[[workloads]]\nname = "resnet50"\n[axes]\namp_level = []\n', "non-empty list"),
    ('name = "x"\nstrategy = "random"\n[[workloads]]\nname = "resnet50"\n', "grid|ofat|pairwise"),
    ('name = "x"\ntargets = ["model:ascend999"]\n[[workloads]]\nname = "resnet50"\n', "target='model:ascend999'"),
    ('name = "x"\n', "at least one [[workloads]]"),
    ('name = "x"\nfoo = 1\n[[workloads]]\nname = "resnet50"\n', "matrix key='foo'"),
])
def test_bad_matrix_files_name_the_field(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as err:
        load_matrix(write(tmp_path, text)).expand()
    assert fragment in str(err.value) and "m.toml" in str(err.value)


def test_malformed_toml_and_missing_file(tmp_path):
    with pytest.raises(UserError, match="malformed TOML"):
        load_matrix(write(tmp_path, "name = [unclosed\n"))
    with pytest.raises(UserError, match="no such matrix file"):
        load_matrix(tmp_path / "absent.toml")


@pytest.mark.slow
def test_shipped_matrices_expand():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "matrices"
    for path in sorted(root.glob("*.toml")):
        exp = load_matrix(path).expand()
        assert exp.cells(), path


def test_cell_id_is_pinned_across_machines_and_releases():
    # A changed id would orphan every stored result: this value must never change.
    cell = Cell(workload="resnet50", preset="tiny", settings=make_settings({"mode": "graph", "amp_level": "O2"}),
                target="model:ascend910b")
    assert cell.id == "8509e87e1269"
