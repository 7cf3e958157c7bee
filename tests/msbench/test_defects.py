"""Issue 14's input defects, one test each: every user mistake is one line on stderr and exit 2.

The CLI runs in-process (`msbench.cli.main`) for speed; a test that needs a real process says why.
"""

import importlib
import math
import shutil
import sys
import textwrap

import pytest

from msbench.cli import main
from msbench.errors import ConfigError
from msbench.matrix_file import load_matrix

BASE = """
    name = "t"
    targets = ["model:ascend910b"]
    [[workloads]]
    name = "resnet50"
    preset = "tiny"
"""


def write(tmp_path, text, name="m.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def refused(capsys, *argv):
    """Run the CLI; assert exit 2 with exactly one stderr line and no traceback; return that line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and lines[0].startswith("msbench "), err
    return lines[0]


# --- a matrix file can run installed code ---------------------------------------------------------

@pytest.mark.parametrize("target", ["os:system", "os:system=touch PWNED", "this:s", "support_targets:InlineTarget"])
def test_a_matrix_target_is_never_imported(tmp_path, capsys, monkeypatch, target):
    calls = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: calls.append(name) or real(name, *a))
    sys.modules.pop("this", None)
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, BASE.replace('["model:ascend910b"]', f'["{target}"]'))
    for argv in (["matrix", "show", str(path)], ["run", str(path), "--out", str(tmp_path / "runs")]):
        assert f"target={target!r} is not allowed" in refused(capsys, *argv)
    assert not (tmp_path / "PWNED").exists() and "this" not in sys.modules
    assert not [c for c in calls if c.split(".")[0] in ("os", "this", "support_targets")]


def test_a_plugin_target_runs_only_when_allowed_on_the_command_line(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    from msbench.store import RunStore

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    plugin = "support_targets:InlineTarget"
    path = write(tmp_path, BASE.replace('["model:ascend910b"]', f'["{plugin}"]'))
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "p", "--quiet",
                 "--allow-plugin", plugin]) == 0
    assert [r.status for r in RunStore(tmp_path / "runs" / "p.jsonl").load()] == ["ok"]
    assert "--allow-plugin='os.system(1)'" in refused(capsys, "matrix", "show", str(path), "--allow-plugin",
                                                      "os.system(1)")


def test_an_installed_entry_point_registers_a_plugin_target(tmp_path, capsys, monkeypatch):
    """A package's `msbench.targets` entry point makes its name a target without --allow-plugin."""
    from pathlib import Path

    from msbench import plugins
    from msbench.store import RunStore

    dist = tmp_path / "site" / "echo_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[msbench.targets]\necho = support_targets:EchoTarget\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    plugins.installed.cache_clear()
    try:
        path = write(tmp_path, BASE.replace('["model:ascend910b"]', '["echo"]'))
        assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "e", "--quiet"]) == 0
        assert [r.cell.target for r in RunStore(tmp_path / "runs" / "e.jsonl").load()] == ["echo"]
        shutil.rmtree(dist)                                                    # uninstalled: unknown again
        plugins.installed.cache_clear()
        assert "target='echo'" in refused(capsys, "matrix", "show", str(path))
    finally:
        plugins.installed.cache_clear()


# --- names that become paths ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "", "x y"])
def test_names_that_become_paths_are_checked(tmp_path, capsys, name):
    path = write(tmp_path, BASE.replace('name = "t"', f'name = "{name}"'))
    assert "name=" in refused(capsys, "matrix", "show", str(path))
    good = write(tmp_path, BASE, "good.toml")
    runs = tmp_path / "deep" / "er" / "runs"
    assert "--run-id=" in refused(capsys, "run", str(good), "--out", str(runs), "--run-id", name or "/")
    assert not list(tmp_path.rglob("*.jsonl"))                      # nothing written, inside --out or above it


# --- silently accepted input ----------------------------------------------------------------------

@pytest.mark.parametrize("edit, fragment", [
    (lambda t: t.replace('preset = "tiny"', 'preset = "tiny"\naccuracy = "false"'), "workload key='accuracy'"),
    (lambda t: 'accuracy = "false"\n' + t, "accuracy='false'"),
    (lambda t: t.replace('["model:ascend910b"]', '[]'), "targets=[] is not allowed; allowed: at least one target"),
    (lambda t: t.replace('["model:ascend910b"]', '"m"'), "targets='m'"),
    (lambda t: t.replace('["model:ascend910b"]', '["frobnicate:x"]'), "target='frobnicate:x'"),
    (lambda t: t.replace('["model:ascend910b"]', '["mindspore"]'), "target='mindspore'"),
    (lambda t: t + "[[include]]\nworkload = \"bert-base\"\namp_level = \"O2\"\n", "workload='bert-base'"),
    (lambda t: t + "[[exclude]]\nworkload = \"alexnet\"\n", "workload='alexnet'"),
    (lambda t: t + "[[exclude]]\npreset = \"huge\"\n", "preset='huge'"),
    (lambda t: t + "[[include]]\ntarget = \"model:nope\"\n", "target='model:nope'"),
    (lambda t: t + "[[include]]\nknob = \"a\"\n", "rule key='knob'"),
    (lambda t: 'include = "x"\n' + t, "include='x'"),
    (lambda t: 'exclude = ["a"]\n' + t, "exclude=['a']"),
    (lambda t: 'axes = [1, 2]\n' + t, "axes=[1, 2]"),
    (lambda t: 'base = "x"\n' + t, "base='x'"),
    (lambda t: t + "[axes]\nseed = 3\n", "axes.seed=3"),
    (lambda t: t + "[axes]\ncolour = [1]\n", "knob='colour'"),
    (lambda t: t.replace('preset = "tiny"', 'preset = "tiny"\noverrides = {colour = 1}'), "preset field='colour'"),
    (lambda t: t.replace('preset = "tiny"', 'preset = "tiny"\noverrides = {image_size = "big"}'), "image_size='big'"),
    (lambda t: t.replace('preset = "tiny"', 'preset = "tiny"\noverrides = "x"'), "overrides='x'"),
    (lambda t: t.replace('preset = "tiny"', 'preset = 3'), "preset=3"),
    (lambda t: t.replace('name = "resnet50"', 'name = ["resnet50"]'), "workload=['resnet50']"),
    (lambda t: 'workloads = "resnet50"\n' + t.split("[[workloads]]")[0], "workloads='resnet50'"),
    (lambda t: 'strategy = 1\n' + t, "strategy=1"),
    (lambda t: 'description = 1\n' + t, "description=1"),
])
def test_matrix_schema_refuses_with_one_line(tmp_path, capsys, edit, fragment):
    path = write(tmp_path, edit(textwrap.dedent(BASE)))
    assert fragment in refused(capsys, "matrix", "show", str(path))
    assert fragment in refused(capsys, "run", str(path), "--out", str(tmp_path / "runs"), "--quiet")


def test_an_include_rule_honours_its_target_and_preset(tmp_path):
    text = BASE.replace('["model:ascend910b"]', '["model:ascend910b", "model:ascend910a"]') + textwrap.dedent("""
        [[include]]
        target = "model:ascend910a"
        amp_level = "O2"
        [[include]]
        preset = "tiny"
        workload = "resnet50"
        seed = 7
    """)
    exp = load_matrix(write(tmp_path, text)).expand()
    o2 = [e.cell.target for e in exp.entries if e.cell.settings.amp_level == "O2"]
    assert o2 == ["model:ascend910a"]
    assert sorted(e.cell.target for e in exp.entries if e.cell.settings.seed == 7) == \
        ["model:ascend910a", "model:ascend910b"]


@pytest.mark.slow
def test_a_run_with_invalid_cells_reads_back(tmp_path, capsys, monkeypatch):
    """Found by the fuzz suite: an `invalid` record (settings that break a rule) made its run file unreadable,
    so `--resume` and `report` failed on it."""
    from pathlib import Path

    from msbench.store import RunStore

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    path = write(tmp_path, BASE + "[axes]\nsink = [false, true]\n")          # sink=true needs mode=graph
    argv = ["run", str(path), "--target", "support_targets:EchoTarget", "--allow-plugin",
            "support_targets:EchoTarget", "--out", str(tmp_path / "runs"), "--run-id", "inv", "--quiet"]
    assert main(argv) == 0
    records = RunStore(tmp_path / "runs" / "inv.jsonl").load()
    assert sorted(r.status for r in records) == ["invalid", "ok"]
    assert main(argv + ["--resume"]) == 0
    assert main(["report", str(tmp_path / "runs"), "--md", str(tmp_path / "r.md")]) == 0


@pytest.mark.parametrize("verb", ["matrix", "run"])
def test_bad_set_values_are_refused_like_predict(tmp_path, capsys, verb):
    path = write(tmp_path, BASE)
    extra = ["show", str(path)] if verb == "matrix" else [str(path), "--out", str(tmp_path / "runs"), "--quiet"]
    assert "amp_level='O9'" in refused(capsys, verb, *extra, "--set", "amp_level=O9")
    assert "knob='colour'" in refused(capsys, verb, *extra, "--set", "colour=1")
    assert "amp_level='O9'" in refused(capsys, "predict", "resnet50", "--set", "amp_level=O9")


def test_a_huge_grid_needs_max_cells(tmp_path, capsys):
    axes = "\n".join(f"{k} = {v}" for k, v in [
        ("amp_level", '["O0", "O1", "O2", "O3"]'), ("seed", list(range(10))), ("workers", list(range(1, 11))),
        ("prefetch", list(range(0, 10))), ("grad_accum", [1, 2, 4])])
    path = write(tmp_path, BASE + "[axes]\n" + axes + "\n")
    line = refused(capsys, "matrix", "show", str(path))
    assert "12001 cells exceed the limit of 5000; pass --max-cells 12001" in line
    assert "12001 cells" in refused(capsys, "run", str(path), "--out", str(tmp_path / "runs"))
    small = write(tmp_path, BASE + "[axes]\nseed = [1, 2, 3]\n", "small.toml")
    assert "limit of 2" in refused(capsys, "matrix", "show", str(small), "--max-cells", "2")
    assert main(["matrix", "show", str(small), "--max-cells", "5"]) == 0
    assert "--max-cells=0" in refused(capsys, "matrix", "show", str(small), "--max-cells", "0")


def test_a_run_of_zero_cells_is_refused_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path, BASE + "[[exclude]]\nworkload = \"resnet50\"\n")
    assert "no cells to run" in refused(capsys, "run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "z")
    assert not (tmp_path / "runs" / "z.jsonl").exists()


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf"])
def test_timeout_must_be_positive(tmp_path, capsys, value):
    path = write(tmp_path, BASE)
    assert "--timeout=" in refused(capsys, "run", str(path), "--out", str(tmp_path / "runs"), "--timeout", value)
    assert "--timeout=" in refused(capsys, "measure", "resnet50", "--timeout", value)


def test_report_on_an_empty_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "no run files" in refused(capsys, "report", str(tmp_path / "empty"))


def test_out_pointing_at_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert "--out=" in refused(capsys, "run", str(write(tmp_path, BASE)), "--out", str(tmp_path / "afile"))


def test_unreadable_matrix_paths(tmp_path, capsys):
    (tmp_path / "bin.toml").write_bytes(b"name = \"\xff\xfe\"\n")
    assert "not UTF-8" in refused(capsys, "matrix", "show", str(tmp_path / "bin.toml"))
    assert "is a directory" in refused(capsys, "matrix", "show", str(tmp_path))
    assert "is a directory" in refused(capsys, "run", str(tmp_path), "--out", str(tmp_path / "runs"))


@pytest.mark.parametrize("key, value, words", [
    ("memory.gbps", "nan", "a number > 0"), ("memory.gbps", "0", "a number > 0"), ("host.core_speed", "0.0", "> 0"),
    ("memory.fragmentation", "inf", "a number >= 0"), ("memory.fragmentation", "-1.0", ">= 0"),
    ("cube.tile", "0", "an integer > 0"),
])
def test_profile_values_are_finite_and_positive_where_they_divide(tmp_path, key, value, words):
    from hardware.model.profile import PROFILE_DIR as PROFILES_DIR, HardwareProfile

    section, field = key.split(".")
    lines = (PROFILES_DIR / "ascend910b.toml").read_text().splitlines()
    current, out = "", []
    for line in lines:
        if line.startswith("["):
            current = line.strip("[] ")
        if current == section and line.split("=")[0].strip() == field:
            line = f"{field} = {value}"
        out.append(line)
    path = tmp_path / "ascend910b.toml"
    path.write_text("\n".join(out) + "\n")
    with pytest.raises(ConfigError) as err:
        HardwareProfile.from_toml(path)
    assert key in str(err.value) and words in str(err.value)
    assert not math.isnan(HardwareProfile.from_toml(PROFILES_DIR / "ascend910b.toml").memory.gbps)
