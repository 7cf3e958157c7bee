"""A record's fingerprint changes with what produced its numbers and with nothing else."""

from __future__ import annotations

import shutil

from hardware.mindspore.target import MindSporeTarget
from hardware.model import target as model_target
from hardware.model.target import ModelTarget
from msbench.cell import Cell
from msbench.settings import make_settings

CELL = Cell(workload="resnet50", settings=make_settings({"mode": "graph"}), target="model:ascend910b")


def test_model_fingerprint_follows_sources_profile_calibration_and_accuracy(tmp_path, monkeypatch):
    b = ModelTarget("ascend910b")
    first = b.fingerprint(CELL)
    assert first == ModelTarget("ascend910b").fingerprint(CELL)                 # stable
    assert first == b.fingerprint(Cell(workload="resnet50", target="model:ascend910b"))   # knobs are the cell id's
    assert first != ModelTarget("ascend910a").fingerprint(CELL)                 # the profile
    assert first != ModelTarget("ascend910b", accuracy=True).fingerprint(CELL)  # the accuracy run's sources
    assert first != b.fingerprint(Cell(workload="bert-base", target="model:ascend910b"))   # the workload's sources

    def fresh() -> str:        # a target is one run's: it hashes the files as the run found them
        return ModelTarget("ascend910b").fingerprint(CELL)

    calibration = tmp_path / "calibration"
    calibration.mkdir()
    monkeypatch.setattr(model_target, "CALIBRATION_DIR", calibration)
    empty = fresh()
    (calibration / "ascend910b_matmul.csv").write_text("m,n,k,us\n1024,1024,1024,12.5\n")
    with_table = fresh()
    (calibration / "ascend910b_matmul.csv").write_text("m,n,k,us\n1024,1024,1024,13.0\n")
    assert len({empty, with_table, fresh()}) == 3                             # any file, any edit

    sources = tmp_path / "model"
    shutil.copytree(model_target.MODEL_DIR, sources, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(model_target, "MODEL_DIR", sources)
    running = ModelTarget("ascend910b")
    before = running.fingerprint(CELL)
    (sources / "compute.py").write_text((sources / "compute.py").read_text() + "\n# an edit\n")
    assert fresh() != before
    assert running.fingerprint(CELL) == before          # a run's cells keep the fingerprint it started with


def test_real_target_fingerprint_names_its_device():
    cell = CELL.with_target("mindspore:cpu")
    assert MindSporeTarget("cpu").fingerprint(cell) == MindSporeTarget("cpu").fingerprint(cell)
    assert MindSporeTarget("cpu").fingerprint(cell) != ModelTarget("cpu").fingerprint(cell)


def test_options_that_change_a_record_change_its_fingerprint():
    """Seeds, the accuracy knobs and the Profiler change what a record holds, so --resume must redo it."""
    targets = ((lambda **kw: ModelTarget("ascend910b", **kw), CELL),
               (lambda **kw: MindSporeTarget("cpu", **kw), CELL.with_target("mindspore:cpu")))
    for build, cell in targets:
        prints = [build(accuracy=True).fingerprint(cell),
                  build(accuracy=True, accuracy_seeds=5).fingerprint(cell),
                  build(accuracy=True, accuracy_knobs=("amp_level",)).fingerprint(cell),
                  build(profile_dir="/tmp/p").fingerprint(cell), build().fingerprint(cell)]
        assert len(set(prints)) == len(prints)
        assert build(accuracy_seeds=5).fingerprint(cell) == build().fingerprint(cell)   # seeds unused without accuracy
        assert build(accuracy=True, accuracy_knobs=("loss_scale", "amp_level")).fingerprint(cell) == \
            build(accuracy=True, accuracy_knobs=("amp_level", "loss_scale")).fingerprint(cell)
