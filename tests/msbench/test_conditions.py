"""Machine conditions: /proc/stat parsing, the comparability rule and the bounded quiet wait."""

from __future__ import annotations

import itertools

from msbench.conditions import (ConditionsProbe, mismatch, others_load, overloaded, read_cpu_times, summarize,
                                wait_quiet)


def test_read_cpu_times_parses_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 1 4 10 0 0\ncpu0 1 2 3\n")
    t = read_cpu_times(stat)
    assert (t.total, t.steal, t.busy) == (990, 10, 990 - 800 - 20 - 10)
    assert read_cpu_times(tmp_path / "missing") is None


def test_probe_records_load_and_cpu_shares():
    with ConditionsProbe() as probe:
        sum(i * i for i in range(200_000))
    r = probe.result
    assert r["cores"] >= 1 and len(r["load_before"]) == 3 and r["seconds"] > 0
    if "busy_during" in r:                    # only when the clock advanced a jiffy
        assert 0 <= r["others_during"] <= r["busy_during"] <= 1


def test_mismatch_rule():
    quiet = {"cores": 2, "load_before": [0.2, 0.2, 0.2], "others_during": 0.05, "steal_during": 0.0}
    idle_too = {"cores": 2, "load_before": [0.4, 0.2, 0.2], "others_during": 0.1, "steal_during": 0.0}
    busy = {"cores": 2, "load_before": [1.8, 1.0, 1.0], "others_during": 0.8, "steal_during": 0.0}
    overload = {"cores": 2, "load_before": [5.0, 4.0, 4.0], "others_during": 0.9, "steal_during": 0.0}
    stolen = {**quiet, "steal_during": 0.3}
    assert others_load(busy) == 1.8 and overloaded(overload) == "load 5.00 > 2 cores"
    assert mismatch(quiet, idle_too) is None                 # both below the floor: no difference
    assert "ratio" in mismatch(quiet, busy)
    assert "overloaded" in mismatch(busy, overload)
    assert "steal" in mismatch(quiet, stolen)
    assert mismatch(overload, {**overload, "load_before": [6.0, 5, 5]}) is None
    assert mismatch(None, busy) is None                      # an old record without conditions: unknown


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
