"""Calibration and profiles never read the validation data: a published figure that checks the model
must not also have tuned it (DESIGN.md flow rules; STYLE.md §12).

Two checks: a static scan of every file under hardware/calibration/ and hardware/profiles/ for an
import of, or a path into, hardware/validation/; and a dynamic one that loads every profile (and runs
the calibration derive script, where this tree has one) with file opening made to fail on
hardware/validation/*.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hardware.model import profile as profile_module
from hardware.validation.cases import PUBLISHED

REPO = Path(__file__).resolve().parents[2]
VALIDATION_DIR = REPO / "hardware" / "validation"
GUARDED = (REPO / "hardware" / "calibration", REPO / "hardware" / "profiles")
PATH_MARKERS = ("hardware/validation", "hardware.validation", "published.toml", "hardware\\validation")


def path_like(value: str) -> bool:
    """A string that names the validation folder or file (not prose that mentions the word)."""
    return value == "validation" or any(m in value for m in PATH_MARKERS)


def docstrings(tree: ast.AST) -> set[int]:
    holders = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, holders) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def offences(path: Path) -> list[str]:
    """What in this file reaches the validation data: an import, or a string naming its path. Python is
    read through its AST (docstrings and comments may explain the rule); data files as text."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return [m for m in PATH_MARKERS if m in text]
    tree = ast.parse(text, str(path))
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        found += [f"import {n}" for n in names if "validation" in n.split(".")]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and path_like(node.value):
            found.append(f"string {node.value!r}")
    return found


def guarded_files() -> list[Path]:
    return [p for d in GUARDED if d.is_dir() for p in sorted(d.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".toml", ".json", ".csv", ".txt", ".md")]


def test_the_scan_catches_each_way_in(tmp_path):
    """The scanner is not vacuous: each way of reaching the data is flagged."""
    cases = {
        "a.py": "from hardware.validation.cases import load_catalogue\n",
        "b.py": "import hardware.validation\n",
        "c.py": "from hardware import validation\n",
        "d.py": "p = ROOT / 'hardware' / 'validation' / 'x'\n",
        "e.toml": "# derived from hardware/validation/published.toml\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert offences(tmp_path / name), name
    (tmp_path / "ok.py").write_text('"""Never reads hardware/validation/ (validation data)."""\n'
                                     "from hardware.model.profile import load_profile  # not hardware.validation\n")
    assert offences(tmp_path / "ok.py") == []


def test_calibration_and_profiles_do_not_name_the_validation_data():
    files = guarded_files()
    assert any(p.suffix == ".toml" for p in files)            # the profiles at least are scanned
    bad = {str(p.relative_to(REPO)): offences(p) for p in files if offences(p)}
    assert bad == {}


def is_validation_path(target: object) -> bool:
    try:
        return Path(str(target)).resolve().is_relative_to(VALIDATION_DIR)
    except (TypeError, ValueError, OSError):
        return False


@pytest.fixture
def no_validation_reads(monkeypatch):
    """builtins.open and io.open (which pathlib uses) refuse any file under hardware/validation/."""
    real_open = io.open

    def guarded(file, *args, **kwargs):
        if is_validation_path(file):
            raise AssertionError(f"read of validation data: {file}")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded)
    return guarded


def test_the_guard_fires(no_validation_reads):
    with pytest.raises(AssertionError, match="validation data"):
        PUBLISHED.read_text()
    with pytest.raises(AssertionError, match="validation data"):
        open(PUBLISHED)


def test_profiles_load_without_reading_the_validation_data(no_validation_reads):
    profile_module.load_profile.cache_clear()                 # really read every file now, under the guard
    try:
        for name in profile_module.profile_names():
            assert profile_module.load_profile(name).name == name
    finally:
        profile_module.load_profile.cache_clear()


AUDIT = textwrap.dedent("""
    import pathlib, runpy, sys
    guarded = pathlib.Path(sys.argv[1]).resolve()

    def hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes, pathlib.Path)):
            try:
                target = pathlib.Path(args[0] if not isinstance(args[0], bytes) else args[0].decode()).resolve()
            except (OSError, ValueError):
                return
            if target.is_relative_to(guarded):
                raise RuntimeError(f"calibration read validation data: {target}")

    sys.addaudithook(hook)
    sys.argv = ["derive"]
    runpy.run_module("hardware.calibration.derive", run_name="__main__")
""")


def run_derive_guarded(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", AUDIT, str(tree / "hardware" / "validation")], cwd=tree,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(tree)})


def test_the_audit_hook_catches_a_derive_that_reads_the_data(tmp_path):
    """The subprocess guard is not vacuous: a derive script that reads published.toml fails under it."""
    for package in ("hardware", "hardware/calibration", "hardware/validation"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "hardware/validation/published.toml").write_text("")
    (tmp_path / "hardware/calibration/derive.py").write_text(
        "from pathlib import Path\nPath(__file__).parents[1].joinpath('validation', 'published.toml').read_text()\n")
    result = run_derive_guarded(tmp_path)
    assert result.returncode != 0 and "calibration read validation data" in result.stderr


@pytest.mark.slow
def test_the_derive_script_runs_without_reading_the_validation_data(tmp_path):
    """`python -m hardware.calibration.derive` in a copy of the tree (it rewrites profile tables), with an
    audit hook that fails any open() under the copy's hardware/validation/."""
    if not (REPO / "hardware" / "calibration" / "derive.py").is_file():
        pytest.skip("hardware/calibration/derive.py is not in this tree")
    copy = tmp_path / "tree"
    for part in ("hardware", "msbench", "workloads"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    result = run_derive_guarded(copy)
    assert "calibration read validation data" not in result.stderr
    assert result.returncode == 0, result.stderr[-2000:]
