"""The built wheel, installed (not editable) into a fresh virtual environment, works from a folder outside
the checkout: every file msbench reads at run time ships in it and is found through its package.

The environment reuses this one's dependencies (a .pth line to its site-packages, whose editable msbench
is never imported: that folder is not a site directory of the new environment, so its .pth files are not
read), so nothing is downloaded and MindSpore is not installed twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hardware.validation.cases import load_catalogue
from hardware.validation.report import pairs_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "msbench", "hardware", "workloads", "matrices")


def has_build_backend() -> bool:
    """setuptools >= 68 and wheel here: the wheel builds without an isolated (downloaded) build environment."""
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 68 and bool(version("wheel"))
    except Exception:  # noqa: BLE001 - either one missing: build in isolation
        return False


KEPT_CASE = "modelzoo-resnet50-imagenet-b256-8p"


def validated_cases(profile: str) -> list:
    """The cases `msbench validate --profile PROFILE` predicts (its own in the dev part, and its pairs')."""
    dev = load_catalogue().part("dev")
    ids = [c.id for c in dev.expressible(profile)] + [i for p in pairs_of(dev, profile) for i in (p.a, p.b)]
    return [dev.case(i) for i in dict.fromkeys(ids)]


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bin folder of the fresh environment, its site-packages, an environment for its commands)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"                        # a copy of what the wheel is built from: no build/ in the checkout
    src.mkdir()
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "MSBENCH_EXECUTOR")}
    build = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-w", str(work / "dist"), "--quiet"]
    run(build + (["--no-build-isolation"] if has_build_backend() else []), work, env)
    wheel = next((work / "dist").glob("msbench-*.whl"))
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work, env)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(run([str(venv / "bin" / "python"), "-c", where], work, env).stdout.strip())
    (purelib / "_msbench_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
         "--quiet", str(wheel)], work, env)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return venv / "bin", purelib, env


def test_the_installed_wheel_predicts_runs_reports_and_validates_from_elsewhere(installed, tmp_path):
    bin_dir, purelib, env = installed
    msbench = str(bin_dir / "msbench")
    where = run([str(bin_dir / "python"), "-c", "import hardware, matrices, msbench, workloads; "
                 "print(msbench.__file__, hardware.__file__, matrices.__file__, workloads.__file__)"], tmp_path, env)
    assert all(Path(f).is_relative_to(purelib) for f in where.stdout.split()), where.stdout   # not the checkout
    assert sorted(p.name for p in (purelib / "hardware/calibration/data").iterdir()) == \
        sorted(p.name for p in (ROOT / "hardware/calibration/data").iterdir())       # csv and jsonl included

    # The same bytes as the checkout's (its files found where a checkout has them), here and in validate.
    checkout_env = {**env, "PYTHONPATH": str(ROOT)}
    predict = ["predict", "resnet50", "--hardware", "ascend910b", "--json"]
    predicted = run([msbench, *predict], tmp_path, env)
    assert json.loads(predicted.stdout)["step_time_s"] > 0
    assert predicted.stdout == run([sys.executable, "-m", "msbench.cli", *predict], tmp_path, checkout_env).stdout

    smoke = purelib / "matrices" / "smoke.toml"
    ran = run([msbench, "run", str(smoke), "--target", "model:ascend910b", "--out", "runs", "--run-id", "smoke",
               "--quiet"], tmp_path, env)
    records = [json.loads(line) for line in (tmp_path / "runs" / "smoke.jsonl").read_text().splitlines()]
    assert len(records) == 9 and {r["status"] for r in records} == {"ok"}, ran.stdout[-2000:]

    run([msbench, "report", "runs/smoke.jsonl", "--md", "report.md", "--html", "report.html"], tmp_path, env)
    assert "resnet50" in (tmp_path / "report.md").read_text() and (tmp_path / "report.html").stat().st_size > 0

    # The published-runs validation reads the profiles, calibration data and published.toml from the wheel.
    # One case is predicted, the model zoo's batch-256 ResNet-50, whose graph the recipe prediction above has
    # compiled: every other case is a cold compile of its own (ten to twenty seconds each, CI's budget), and a
    # skipped case is still read and listed.
    validate = ["validate", "--profile", "ascend910a", "--json"]
    for case in validated_cases("ascend910a"):
        if case.id != KEPT_CASE:
            validate += ["--skip", case.id]
    wheel = run([msbench, *validate, "--out", "wheel-val"], tmp_path, env)
    checkout = run([sys.executable, "-m", "msbench.cli", *validate, "--out", "val"], tmp_path, checkout_env)
    assert json.loads(wheel.stdout) == json.loads(checkout.stdout)
    rows = json.loads(wheel.stdout)["cases"]
    assert len(rows) > 3 and [r["id"] for r in rows if r.get("predicted_step_s")] == [KEPT_CASE], rows
    assert (tmp_path / "wheel-val" / "validation-report-ascend910a.json").is_file()
