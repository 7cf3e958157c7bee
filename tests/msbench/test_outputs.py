"""Issue 43: output paths are checked before any work (one line, exit 2, nothing recorded) and traces and
reports are written atomically (a full disk leaves the old file, or none, never a truncated one)."""

import errno
import json

import pytest

from msbench.cli import main
from msbench.errors import UserError
from msbench.outputs import write_atomic
from tests.msbench.test_store import record


def one_line(capsys, verb):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"msbench {verb}: error: ") and "Traceback" not in err, err
    return err.strip()


def model_matrix(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('name = "m"\ntargets = ["model:ascend910b"]\n[[workloads]]\nname = "resnet50"\n')
    return path


def test_run_with_a_file_as_trace_dir_runs_no_cell(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    runs = tmp_path / "runs"
    assert main(["run", str(model_matrix(tmp_path)), "--out", str(runs), "--run-id", "r", "--quiet",
                 "--trace-dir", str(afile)]) == 2
    assert one_line(capsys, "run") == (f"msbench run: error: --trace-dir={str(afile)!r} is not allowed; "
                                       "allowed: a directory path (this is a file)")
    assert not (runs / "r.jsonl").exists()
    assert main(["run", str(model_matrix(tmp_path)), "--out", str(runs), "--trace-dir", ""]) == 2
    assert one_line(capsys, "run") == "msbench run: error: --trace-dir='' is not allowed; allowed: a directory path"


def test_run_with_an_out_under_a_file_is_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["run", str(model_matrix(tmp_path)), "--out", str(afile / "runs"), "--quiet"]) == 2
    assert one_line(capsys, "run").startswith(f"msbench run: error: --out={str(afile / 'runs')!r} is not allowed; "
                                              "allowed: a directory this user can write (")


@pytest.mark.parametrize("where", ["dir", "empty", "under_a_file"])
def test_predict_trace_to_a_bad_path_is_one_line_before_predicting(tmp_path, capsys, monkeypatch, where):
    import msbench.commands.predict as model_cli

    def no_prediction(cell):
        raise AssertionError("predicted before the --trace path was checked")

    monkeypatch.setattr(model_cli, "cell_prediction", no_prediction)
    (tmp_path / "afile").write_text("x")
    trace = {"dir": str(tmp_path), "empty": "", "under_a_file": str(tmp_path / "afile" / "t.json")}[where]
    assert main(["predict", "resnet50", "--hardware", "ascend910b", "--trace", trace]) == 2
    allowed = {"dir": "a file path (this is a directory)", "empty": "a file path",
               "under_a_file": f"a file path in a directory this user can write ({tmp_path / 'afile'} is a file)"}[where]
    assert one_line(capsys, "predict") == f"msbench predict: error: --trace={trace!r} is not allowed; allowed: {allowed}"


@pytest.mark.parametrize("option", ["--html", "--md"])
def test_report_to_a_directory_is_one_line_and_writes_nothing(tmp_path, capsys, option):
    from msbench.store import RunStore

    RunStore(tmp_path / "r.jsonl").append(record(1))
    other = tmp_path / ("r.md" if option == "--html" else "r.html")
    other_option = "--md" if option == "--html" else "--html"
    assert main(["report", str(tmp_path / "r.jsonl"), option, str(tmp_path), other_option, str(other)]) == 2
    assert one_line(capsys, "report") == (f"msbench report: error: {option}={str(tmp_path)!r} is not allowed; "
                                          "allowed: a file path (this is a directory)")
    assert not other.exists()


@pytest.mark.parametrize("fails", ["write", "fsync", "replace"])
def test_a_full_disk_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch, fails):
    import msbench.outputs as outputs

    path = tmp_path / "step.trace.json"
    path.write_text(json.dumps({"old": True}))

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if fails == "write":
        real_fdopen = outputs.os.fdopen

        class Full:
            def __init__(self, fd, mode):
                self.fh = real_fdopen(fd, mode)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

            def write(self, data):
                self.fh.write(data[:100])
                self.fh.flush()
                no_space()

        monkeypatch.setattr(outputs.os, "fdopen", Full)
    else:
        monkeypatch.setattr(outputs.os, fails, no_space)
    with pytest.raises(UserError, match=rf"^cannot write {path}: disk full; nothing was written there$"):
        write_atomic(path, json.dumps({"new": "x" * 10_000}))
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_trace_is_written_whole(tmp_path):
    assert write_atomic(tmp_path / "new" / "t.json", '{"a": 1}').read_text() == '{"a": 1}'


def test_measure_profile_dir_that_is_a_file_is_one_line_before_measuring(tmp_path, capsys, monkeypatch):
    import msbench.commands.measure as measure

    monkeypatch.setattr(measure, "run_cells", lambda *a, **k: pytest.fail("measured before --profile-dir was checked"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["measure", "resnet50", "--profile", "--profile-dir", str(afile)]) == 2
    assert one_line(capsys, "measure") == (f"msbench measure: error: --profile-dir={str(afile)!r} is not allowed; "
                                           "allowed: a directory path (this is a file)")
