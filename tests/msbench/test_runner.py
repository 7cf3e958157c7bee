import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from msbench.runner import in_shard, run_matrix
from msbench.cell_run import REASON_CHARS, clip_reason
from msbench.store import RunStore

SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture
def support_path(monkeypatch):
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]))


SCRIPTED, INLINE, SLOW = (f"support_targets:{c}" for c in ("ScriptedTarget", "InlineTarget", "SlowInlineTarget"))
PLUGINS = (SCRIPTED, INLINE, SLOW)          # matrix files name them; only the allow-list makes them code


def matrix(tmp_path, target, seeds, accuracy=False):
    path = tmp_path / "faults.toml"
    path.write_text(textwrap.dedent(f"""
        name = "faults"
        targets = ["{target}"]
        accuracy = {str(accuracy).lower()}
        [[workloads]]
        name = "resnet50"
        preset = "tiny"
        [axes]
        seed = {json.dumps(seeds)}
    """))
    return path


@pytest.mark.slow
def test_every_failure_becomes_a_record_and_the_run_goes_on(tmp_path, support_path):
    path = matrix(tmp_path, SCRIPTED, [1, 2, 3, 4, 5, 6], accuracy=True)
    result = run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", timeout=8, progress=False)
    status = {r.cell.settings.seed: (r.status, r.reason or "") for r in RunStore(result.path).load()}
    assert status[1][0] == "ok"
    assert status[2][0] == "failed" and "exit code 3" in status[2][1]
    assert status[3][0] == "timeout" and "8 s" in status[3][1]
    assert status[4][0] == "failed" and "scripted failure" in status[4][1]
    assert status[5][0] == "oom"
    assert status[6] == ("unsupported", "seed 6 asks for a knob this target cannot honour")
    records = RunStore(result.path).load()
    assert all(r.provenance.get("python") and r.run_id == result.path.stem for r in records)


def test_accuracy_delta_is_against_the_baseline_cell(tmp_path, support_path):
    path = matrix(tmp_path, INLINE, [1, 7, 9], accuracy=True)
    records = {r.cell.settings.seed: r for r in run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", progress=False).records}
    assert records[1].metrics.accuracy_delta_pp == 0.0
    assert records[7].metrics.accuracy_delta_pp == pytest.approx(0.6)
    assert records[9].metrics.accuracy_delta_pp == pytest.approx(0.8)


def test_shards_partition_the_cells(tmp_path, support_path):
    path = matrix(tmp_path, INLINE, list(range(7, 20)))
    ids = [{r.cell_id for r in run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", shard=f"{i}/3", progress=False).records}
           for i in (1, 2, 3)]
    assert sum(map(len, ids)) == 14 and not (ids[0] & ids[1] or ids[1] & ids[2] or ids[0] & ids[2])
    assert in_shard("00000000000f", (1, 3)) and not in_shard("00000000000f", (2, 3))


def test_only_runs_the_cells_named(tmp_path, support_path):
    """validate's default subset: run_matrix(only=ids) runs those cells of the matrix and no others."""
    path = matrix(tmp_path, INLINE, list(range(7, 12)))
    every = [r.cell_id for r in run_matrix(path, plugins=PLUGINS, out=tmp_path / "all", progress=False).records]
    chosen = set(every[1:3])
    assert {r.cell_id for r in run_matrix(path, plugins=PLUGINS, out=tmp_path / "some", progress=False,
                                          only=chosen).records} == chosen


def test_jobs_run_cells_concurrently_and_record_each_once(tmp_path, support_path):
    path = matrix(tmp_path, INLINE, list(range(7, 15)))
    result = run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", jobs=3, progress=False)
    ids = [r.cell_id for r in RunStore(result.path).load()]
    assert len(ids) == len(set(ids)) == 9


@pytest.mark.slow
def test_sigkill_midway_then_resume_records_every_cell_once(tmp_path, support_path):
    path = matrix(tmp_path, SLOW, list(range(7, 17)))
    cmd = [sys.executable, "-m", "msbench.cli", "run", str(path), "--out", str(tmp_path / "runs"),
           "--run-id", "killed", "--quiet", "--allow-plugin", SLOW]
    run_file = tmp_path / "runs" / "killed.jsonl"
    proc = subprocess.Popen(cmd, env=os.environ.copy())
    deadline = time.time() + 60
    while time.time() < deadline and (not run_file.exists() or len(run_file.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(RunStore(run_file).load(repair=True))
    assert 3 <= partial < 11
    done = subprocess.run(cmd + ["--resume"], env=os.environ.copy(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ids = [r.cell_id for r in RunStore(run_file).load()]
    assert len(ids) == len(set(ids)) == 11


def test_existing_run_needs_resume(tmp_path, support_path):
    path = matrix(tmp_path, INLINE, [1])
    run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", run_id="once", progress=False)
    from msbench.errors import UserError

    with pytest.raises(UserError, match="--resume"):
        run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", run_id="once", progress=False)
    assert run_matrix(path, plugins=PLUGINS, out=tmp_path / "runs", run_id="once", resume=True, progress=False).records == []


def test_default_jobs_follow_the_targets(support_path):
    from msbench.runner import default_jobs

    assert default_jobs([INLINE], {}, PLUGINS) == 1          # says nothing: one at a time
    assert default_jobs(["mindspore:cpu"], {"accuracy": False}) == 1        # measuring: never shares the host
    model = default_jobs(["model:ascend910b"], {"accuracy": False})
    assert model == min(2, os.cpu_count() or 1)
    assert default_jobs(["model:ascend910b", "mindspore:cpu"], {"accuracy": False}) == 1


def test_a_long_reason_keeps_its_first_line_the_traceback_start_and_the_error():
    """Warnings before the traceback and a deep stack: the exit code, the traceback's start and the final
    error all survive the clip, and the reason stays bounded."""
    frames = "".join(f'  File "/a/very/long/clone/path/module_{i}.py", line {i}, in f{i}\n' for i in range(200))
    reason = "exit code 1\n" + "[WARNING] noise\n" * 300 + "Traceback (most recent call last):\n" + frames + \
        "ValueError: hidden must be at least 1, got 0\n"
    clipped = clip_reason(reason)
    assert clipped.startswith("exit code 1\nTraceback (most recent call last):")
    assert clipped.endswith("ValueError: hidden must be at least 1, got 0\n")
    assert "characters cut" in clipped and len(clipped) <= REASON_CHARS + 64
    assert clip_reason("exit code 1\nshort") == "exit code 1\nshort"


DEFERRING, LANES = "support_targets:DeferringTarget", "support_targets:LaneTarget"


def test_predictions_are_recorded_before_any_accuracy_training(tmp_path, support_path, capsys):
    """`make bench` shows its prediction table before the trainings: every cell is predicted and written
    first, then trained baseline first, and the run file's last record of each cell has its accuracy."""
    import support_targets

    support_targets.DeferringTarget.log = []
    path = matrix(tmp_path, DEFERRING, [1, 7, 9], accuracy=True)
    result = run_matrix(path, plugins=(DEFERRING,), out=tmp_path / "runs", progress=True)
    log = support_targets.DeferringTarget.log
    assert [kind for kind, _ in log] == ["predict"] * 3 + ["train"] * 3 and log[3] == ("train", 1)
    out = capsys.readouterr()
    assert out.out.index("predictions (accuracy follows)") < out.out.rindex("cells recorded in")
    assert "predictions: 3 cell(s) to go" in out.err and "accuracy: 3 cell(s) to go" in out.err  # lines, not a bar
    assert "accuracy: 3/3 (" in out.err                         # the phase's last cell always gets its line
    lines = RunStore(result.path).load()
    assert len(lines) == 6 and all("pending" in r.metrics.extra["accuracy_run"] for r in lines[:3])
    final = {r.cell.settings.seed: r for r in lines[3:]}
    assert final[7].metrics.accuracy_delta_pp == pytest.approx(0.6) and final[1].metrics.accuracy_delta_pp == 0.0


@pytest.mark.parametrize("target, seed, trained", [(DEFERRING, 9, ("train", 9)), (LANES, 7, ("train", 7, 2))])
def test_a_run_interrupted_during_the_trainings_resumes_them_without_predicting_again(tmp_path, support_path, target,
                                                                                     seed, trained):
    """One training at a time or two (LANES: the interrupt comes in one lane while the other trains): the
    resumed run trains only what was pending."""
    import support_targets
    from msbench.runner import RunInterrupted

    support_targets.DeferringTarget.log = []
    support_targets.LaneTarget.trained, support_targets.LaneTarget.barrier = {}, None
    support_targets.DeferringTarget.interrupt_seed = seed
    path = matrix(tmp_path, target, [1, 7, 9], accuracy=True)
    with pytest.raises(RunInterrupted):
        run_matrix(path, plugins=(target,), out=tmp_path / "runs", run_id="r", progress=False)
    support_targets.DeferringTarget.log = []
    result = run_matrix(path, plugins=(target,), out=tmp_path / "runs", run_id="r", resume=True, progress=False)
    assert support_targets.DeferringTarget.log == [trained]
    latest = {r.cell_id: r for r in RunStore(result.path).load()}
    assert all(r.metrics.accuracy is not None and r.metrics.accuracy_delta_pp is not None for r in latest.values())



def test_the_accuracy_phase_trains_two_groups_at_once_and_each_once(tmp_path, support_path):
    """Two lanes: the baseline's group and the group seeds 7 and 9 share start together (a barrier in the
    target waits for both), each group trains once, and the faster group's records are written only after
    the baseline they are compared with, so every delta is there."""
    import threading

    import support_targets

    support_targets.DeferringTarget.log = []
    support_targets.LaneTarget.trained = {}
    support_targets.LaneTarget.barrier = threading.Barrier(2, timeout=10)
    path = matrix(tmp_path, LANES, [1, 7, 9], accuracy=True)
    result = run_matrix(path, plugins=(LANES,), out=tmp_path / "runs", progress=False)
    trained = [entry for entry in support_targets.DeferringTarget.log if entry[0] == "train"]
    assert sorted(trained) == [("train", 1, 2), ("train", 7, 2)]
    assert [entry[1] for entry in trained] == [7, 1]                # the baseline's group finished last
    final = RunStore(result.path).load()[3:]
    assert final[0].cell.settings.seed == 1                         # ... and was still written first
    deltas = {r.cell.settings.seed: r.metrics.accuracy_delta_pp for r in final}
    assert deltas == {1: 0.0, 7: pytest.approx(0.6), 9: pytest.approx(0.6)}

