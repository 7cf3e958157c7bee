"""A prediction is a pure function of (graph, settings, profile, calibration files): the same bytes with
another cache directory, on one core, under another hostname, and after a comment edit in a workload."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A data-bound-capable cell: 4 pipeline workers read the calibrated scaling law, 8 devices the comm model.
ARGS = ("predict", "resnet50", "--preset", "tiny", "--hardware", "ascend910b", "--set", "workers=4",
        "--set", "devices=8", "--json")


def predict(repo: Path, cache: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "MSBENCH_CACHE": str(cache), "PYTHONPATH": str(repo)}
    return subprocess.run([*prefix, sys.executable, "-m", "msbench.cli", *ARGS], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache-a")
    first = predict(REPO, cache)
    assert first.returncode == 0, first.stderr
    assert '"host_cost_hash":' in first.stdout
    return cache, first.stdout


@pytest.mark.slow
def test_same_bytes_with_another_cache_directory(baseline, tmp_path):
    cache, text = baseline
    other = predict(REPO, tmp_path / "cache-b")                 # cold: extracts the graph again
    assert other.returncode == 0, other.stderr
    assert other.stdout == text


@pytest.mark.slow
def test_same_bytes_on_one_core(baseline):
    if shutil.which("taskset") is None:
        pytest.skip("taskset is not installed")
    cache, text = baseline
    one_core = predict(REPO, cache, ("taskset", "-c", "0"))
    assert one_core.returncode == 0, one_core.stderr
    assert one_core.stdout == text


@pytest.mark.slow
def test_same_bytes_under_another_hostname(baseline):
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("unshare --uts is not permitted here (needs root or user namespaces)")
    cache, text = baseline
    renamed = predict(REPO, cache, ("unshare", "--uts", "sh", "-c", 'hostname msbench-elsewhere && exec "$@"', "sh"))
    assert renamed.returncode == 0, renamed.stderr
    assert renamed.stdout == text


@pytest.mark.slow
def test_same_bytes_after_a_comment_edit_in_the_workload(baseline, tmp_path):
    """The edit changes the graph's cache key (a re-extraction) but not what the model reads: no re-probe."""
    cache, text = baseline
    copy = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    workload = copy / "workloads" / "resnet50" / "workload.py"
    workload.write_text(workload.read_text() + "\n# a comment that changes nothing but the source hash\n")
    edited = predict(copy, cache)
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout == text
