"""The one child transport (msbench.child_io): request on stdin, answer in a file, one reader."""

from __future__ import annotations

import os

import pytest

from msbench.child_io import ChildError, call_child, child_env, run_child

CHILD = '''
import sys, time
from msbench.child_io import serve

def answer(request):
    print("MindSpore chatter on stdout", flush=True)     # never read as the answer
    if request.get("sleep"):
        time.sleep(request["sleep"])
    if request.get("fail"):
        sys.exit(3)
    return {"echo": request["x"], "nan": float("nan")}

sys.exit(serve(answer))
'''


@pytest.fixture
def child_module(tmp_path, monkeypatch):
    (tmp_path / "msbench_test_child.py").write_text(CHILD)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    return "msbench_test_child"


def test_answer_comes_from_the_file_not_stdout(child_module):
    call = call_child(child_module, {"x": [1, "two"]}, env=child_env(), timeout=60)
    assert call.result.returncode == 0 and "chatter" in call.result.stdout
    assert call.answer["echo"] == [1, "two"] and call.answer["nan"] != call.answer["nan"]


def test_a_failed_or_slow_child_is_an_error_with_its_reason(child_module):
    assert call_child(child_module, {"x": 0, "fail": True}, env=child_env(), timeout=60).answer is None
    with pytest.raises(ChildError, match="exit 3"):
        run_child(child_module, {"x": 0, "fail": True}, timeout=60)
    with pytest.raises(ChildError, match="timed out"):
        run_child(child_module, {"x": 0, "sleep": 30}, timeout=1)


def test_the_environment_is_built_in_one_place(monkeypatch):
    monkeypatch.setenv("MS_DEV_SAVE_GRAPHS", "1")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    clean = child_env(compile_clean=True)
    assert "MS_DEV_SAVE_GRAPHS" not in clean and clean["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    worker = child_env(plugin_path=True, isa_default=False)
    assert worker["MS_DEV_SAVE_GRAPHS"] == "1" and "ONEDNN_MAX_CPU_ISA" not in worker
    assert os.getcwd() in worker["PYTHONPATH"].split(os.pathsep)
