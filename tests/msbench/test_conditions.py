"""Machine conditions: /proc/stat parsing, the comparability rule and the bounded quiet wait."""

from __future__ import annotations

import itertools
import time

import pytest

from msbench.conditions import (ConditionsProbe, mismatch, not_quiet, others_load, overloaded, read_cpu_times,
                                summarize, wait_quiet)


def test_read_cpu_times_parses_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 1 4 10 0 0\ncpu0 1 2 3\n")
    t = read_cpu_times(stat)
    assert (t.total, t.steal, t.busy) == (990, 10, 990 - 800 - 20 - 10)
    assert read_cpu_times(tmp_path / "missing") is None


def burn_until_the_clock_ticks(cpu_s: float = 0.2) -> None:
    """Burn `cpu_s` of this process's CPU and go on until /proc/stat has advanced: the probe's shares are
    measured only over ticks (a jiffy is 10 ms), so a shorter block would have none to assert on."""
    before = read_cpu_times()
    start = time.process_time()
    while time.process_time() - start < cpu_s or read_cpu_times().total <= before.total:
        sum(i * i for i in range(10_000))


def test_probe_records_load_and_cpu_shares():
    with ConditionsProbe() as probe:
        burn_until_the_clock_ticks()
    r = probe.result
    assert r["cores"] >= 1 and len(r["load_before"]) == 3 and r["seconds"] > 0
    assert 0 <= r["others_during"] <= r["busy_during"] <= 1 and 0 <= r["steal_during"] <= 1
    assert r["own_during"] > 0                # 0.2 CPU seconds of its own, on at most r["cores"] cores


def test_mismatch_rule():
    # 4 cores: on 2, others busy enough to differ by 2x from a quiet cell already count as overloaded
    quiet = {"cores": 4, "load_before": [0.2, 0.2, 0.2], "others_during": 0.05, "steal_during": 0.0}
    idle_too = {"cores": 4, "load_before": [0.4, 0.2, 0.2], "others_during": 0.1, "steal_during": 0.0}
    busy = {"cores": 4, "load_before": [1.8, 1.0, 1.0], "others_during": 0.4, "steal_during": 0.0}
    overload = {"cores": 4, "load_before": [5.0, 4.0, 4.0], "others_during": 0.9, "steal_during": 0.0}
    stolen = {**quiet, "steal_during": 0.3}
    assert others_load(busy) == 1.6 and overloaded(overload) == "others kept 3.60 of 4 cores busy (> 50%)"
    assert mismatch(quiet, idle_too) is None                 # both below the floor: no difference
    assert "ratio" in mismatch(quiet, busy)
    assert "overloaded" in mismatch(busy, overload)
    assert "steal" in mismatch(quiet, stolen)
    assert mismatch(overload, {**overload, "others_during": 0.95}) is None
    assert mismatch(None, busy) is None                      # an old record without conditions: unknown


def test_the_load_average_does_not_count_as_others_where_their_share_was_measured():
    """Back to back on 2 cores, the previous cell's own threads keep the one-minute load average at
    1.6-3.7 while nothing else runs: the measured others' share decides, the load average does not."""
    after_a_cell = {"cores": 2, "load_before": [3.7, 2.0, 1.0], "others_during": 0.02, "steal_during": 0.0}
    assert others_load(after_a_cell) == 0.04 and overloaded(after_a_cell) is None
    assert not_quiet(after_a_cell) is None
    assert mismatch(after_a_cell, {**after_a_cell, "load_before": [0.1, 0.1, 0.1]}) is None
    old_record = {"cores": 2, "load_before": [3.7, 2.0, 1.0]}       # made before the share was kept
    assert others_load(old_record) == 3.7 and overloaded(old_record) == "load 3.70 > 2 cores"
    assert not_quiet(old_record) == "the others' CPU share during it was not measured"
    assert not_quiet({**after_a_cell, "others_during": 0.3}) == "others kept 0.60 of 2 cores busy (quiet below 0.50)"
    assert "steal" in not_quiet({**after_a_cell, "steal_during": 0.3})


def test_probe_counts_its_own_children_as_its_own():
    import subprocess
    import sys
    with ConditionsProbe() as probe:
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass"], check=True)
        burn_until_the_clock_ticks(0.0)
    r = probe.result
    # 0.3 CPU seconds of the child against the parent's few: the child's are counted as the probe's own
    assert r["own_during"] * r["seconds"] * r["cores"] >= 0.25 and r["others_during"] <= r["busy_during"]


# A child that starts a grandchild burning 1 CPU second, waits until it has ended (a zombie: its times
# are kept), and exits without reaping it, as MindSpore leaves its graph-kernel compile workers.
UNWAITED_GRANDCHILD = """
import subprocess, sys, time
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass"
gc = subprocess.Popen([sys.executable, "-c", burn])
while open(f"/proc/{gc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.05)
time.sleep(0.6)                              # the probe samples every 0.2 s
import os; os._exit(0)
"""


@pytest.mark.slow
def test_probe_counts_a_descendant_nobody_waits_for_as_its_own():
    """getrusage alone saw none of the grandchild's CPU second (it was never waited for)."""
    import subprocess
    import sys
    with ConditionsProbe() as probe:
        subprocess.run([sys.executable, "-c", UNWAITED_GRANDCHILD], check=True)
    assert probe.own_cpu_s() >= 0.9, probe.own_cpu_s()


def test_summarize_keeps_the_worst():
    s = summarize([{"cores": 2, "load_before": [1.0, 1, 1], "others_during": 0.2},
                   {"cores": 2, "load_before": [3.0, 1, 1], "others_during": 0.1}])
    assert s["load_before"][0] == 3.0 and s["others_during"] == 0.2 and s["processes"] == 2


def test_wait_quiet_is_bounded_and_says_why():
    said: list[str] = []
    clock = itertools.count(0.0, 2.0)
    result = wait_quiet(5, say=said.append, sample=lambda: 0.9, clock=lambda: next(clock))
    assert result["quiet"] is False and result["waited_s"] >= 5
    assert "waiting up to 5 s" in said[0] and "still busy" in said[-1]
    busy_then_quiet = iter([0.9, 0.1])
    result = wait_quiet(60, say=said.append, sample=lambda: next(busy_then_quiet), clock=lambda: next(clock))
    assert result["quiet"] is True and "quiet after" in said[-1]
    said.clear()
    assert wait_quiet(60, say=said.append, sample=lambda: 0.0)["quiet"] is True and not said


def test_wait_quiet_option_refuses_negative_seconds(capsys):
    from msbench.cli import main

    assert main(["run", "matrices/nightly.toml", "--wait-quiet", "-1"]) == 2
    assert "--wait-quiet=-1 is not allowed; allowed: seconds >= 0" in capsys.readouterr().err
    assert main(["measure", "resnet50", "--wait-quiet", "-5"]) == 2
    assert "--wait-quiet=-5 is not allowed" in capsys.readouterr().err
