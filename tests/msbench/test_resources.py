"""The suite's files are found through their packages (msbench.resources), wherever each package lies:
side by side in the checkout, or each in a folder of its own as Ray's `py_modules` unpacks them on a node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from msbench.resources import PACKAGES, child_pythonpath, package_roots, suite_name, suite_path

ROOT = Path(__file__).resolve().parents[2]

# What a node needs to answer the same as the checkout: the profiles a target name may name, the model's
# fingerprint of a cell (sources, profile, calibration files), a graph's cache key, a digest over packages.
PROBE = """
import json, os
from msbench.cell import Cell
from msbench.freshness import files_digest
from msbench.resources import suite_path
from msbench.settings import make_settings
from msbench.targets import check_target_name, profile_names, resolve_target
from hardware.model.graph import PARSER_SOURCES
from hardware.model.host_cost import calibration_hash
from hardware.validation.cases import load_catalogue
from msbench.cache import source_hash
from workloads.registry import workload_sources

cell = Cell(workload="resnet50", preset="tiny", overrides={}, settings=make_settings({}), target="model:ascend910b")
print(json.dumps({
    "where": str(suite_path("hardware")),
    "profiles": profile_names(),
    "target": check_target_name("model:ascend910b"),
    "fingerprint": resolve_target("model:ascend910b").fingerprint(cell),
    "graph_key": source_hash([*PARSER_SOURCES, *workload_sources("resnet50")]),
    "digest": files_digest([suite_path(d) for d in ("workloads", "hardware/profiles", "msbench/report",
                                                    "hardware/capabilities.py", "matrices")]),
    "host_cost": calibration_hash(),
    "cases": len(load_catalogue().cases),
    "smoke": suite_path("matrices/smoke.toml").read_text(),
}))
"""


def probe(pythonpath: list[Path], cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_package_in_a_folder_of_its_own_answers_as_the_checkout(tmp_path):
    """The reported case: on a Ray node `msbench` and `hardware` are unpacked apart, and a path computed from
    msbench's location found no profiles (`target='model:ascend910b' is not allowed`)."""
    unpacked = []
    for i, package in enumerate(PACKAGES):
        folder = tmp_path / f"_ray_pkg_{i}"
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
        unpacked.append(folder)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    apart = probe(unpacked, elsewhere)
    here = probe([ROOT], elsewhere)
    assert apart.pop("where") == str(tmp_path / "_ray_pkg_1" / "hardware")
    assert here.pop("where") == str(ROOT / "hardware")
    assert "ascend910b" in apart["profiles"] and apart["target"] == "model:ascend910b"
    assert apart == here                 # same names, fingerprints and cache keys as the checkout


def test_names_paths_and_the_childrens_pythonpath(monkeypatch):
    assert suite_path("hardware/profiles/ascend910b.toml").is_file()
    assert suite_path("hardware/calibration/data/public_gemm_tflops.csv").is_file()
    assert suite_path("matrices/smoke.toml").is_file()
    assert suite_name(suite_path("hardware/validation/published.toml")) == "hardware/validation/published.toml"
    assert suite_name(Path(sys.executable)) is None
    assert package_roots() == [str(ROOT)]            # the checkout: one folder holds the four packages
    monkeypatch.setenv("PYTHONPATH", f"/else{os.pathsep}{ROOT}")
    assert child_pythonpath("/somewhere").split(os.pathsep) == [str(ROOT), "/somewhere", "/else"]
