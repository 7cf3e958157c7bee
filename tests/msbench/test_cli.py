import json
import subprocess
import sys

import pytest

from msbench.cli import main


def msbench(*args):
    return subprocess.run([sys.executable, "-m", "msbench.cli", *args], capture_output=True, text=True)


def test_list_knobs_json(capsys):
    assert main(["list", "knobs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} >= {"mode", "amp_level", "sink", "devices", "seed"}


@pytest.mark.slow
def test_user_mistakes_are_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[workloads]]\nname = "resnet50"\n[base]\namp_level = "O9"\n')
    for args in (["matrix", "show", str(bad)], ["matrix", "show", str(tmp_path / "none.toml")],
                 ["run", str(bad), "--shard", "5/2"], ["matrix", "show", str(bad), "--set", "sink=maybe"]):
        proc = msbench(*args)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("msbench ")


def test_matrix_show_prints_cells_and_counts(capsys):
    assert main(["matrix", "show", "matrices/smoke.toml", "--target", "support_targets:InlineTarget",
                 "--allow-plugin", "support_targets:InlineTarget"]) == 0
    out = capsys.readouterr().out
    assert "smoke:" in out and "base" in out


@pytest.mark.parametrize("verb", ["list", "matrix", "run", "measure", "predict", "validate", "report", "compare",
                                  "nightly"])
def test_every_verb_has_help(verb):
    proc = msbench(verb, "--help")
    assert proc.returncode == 0 and "usage" in proc.stdout


def test_cell_from_args_types_overrides_and_refuses_bad_fields():
    from msbench.cli import build_parser
    from msbench.commands.cell_args import cell_from_args
    from msbench.errors import ConfigError

    args = build_parser().parse_args(["predict", "resnet50", "--set", "amp_level=O2", "--override", "batch_size=4"])
    cell = cell_from_args(args, "model:ascend910b")
    assert cell.settings.amp_level == "O2" and cell.overrides == {"batch_size": 4}
    args = build_parser().parse_args(["predict", "resnet50", "--override", "colour=red"])
    with pytest.raises(ConfigError, match="colour"):
        cell_from_args(args, "model:ascend910b")


@pytest.mark.parametrize("module, body, why", [
    ("no_target_a", "class T:\n    pass\n", "TypeError: T() takes no arguments"),
    ("no_target_b", "def T(**options):\n    return 3\n", "it made a int, which has no name, isolate, supports() and run()"),
])
def test_an_entry_point_that_is_no_target_class_is_one_line(tmp_path, monkeypatch, capsys, module, body, why):
    """An installed `msbench.targets` entry point is trusted code, but not necessarily a target."""
    import msbench.plugins as plugins

    (tmp_path / f"{module}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "installed", lambda group: (("t", f"{module}:T"),) if group == plugins.TARGET_GROUP
                        else ())
    matrix = tmp_path / "m.toml"
    matrix.write_text('name = "m"\ntargets = ["t"]\n[[workloads]]\nname = "resnet50"\n')
    assert main(["run", str(matrix), "--out", str(tmp_path / "runs"), "--run-id", "r", "--quiet"]) == 2
    assert capsys.readouterr().err == (f"msbench run: error: target='t' is not allowed; allowed: a target class "
                                       f"({module}:T is not one: {why})\n")
    assert not (tmp_path / "runs" / "r.jsonl").exists()
