"""`msbench validate --profile cpu`'s default: the subset rule (hardware/validation/cpu_subset.py), its
wiring into the command (the subset's cells only, 3 processes each; `--full` the whole matrix) and the
95% intervals of the report's statistics (hardware/validation/intervals.py)."""

from __future__ import annotations

import dataclasses
import os
from argparse import Namespace
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from hardware.calibration.cpu_runs import split_of
from hardware.validation.cpu import VALIDATION_MATRIX, Comparison, summarize
from hardware.validation.cpu_subset import BASELINE, entry_of, quick_cells
from hardware.validation.intervals import median_interval, spearman_interval
from msbench.commands import validate as command
from msbench.matrix_file import load_matrix


@pytest.fixture(scope="module")
def cells():
    return load_matrix(VALIDATION_MATRIX).expand().cells()


def test_the_default_takes_every_baseline_and_each_change_once_out_of_sample(cells):
    quick = quick_cells(cells)
    entries = {entry_of(c) for c in cells}
    changes = {c.label for c in cells} - {BASELINE}
    assert len(quick) == len(entries) + len(changes) == 12 < len(cells) == 40
    assert {entry_of(c) for c in quick if c.label == BASELINE} == entries           # every family and size
    assert Counter(c.label for c in quick if c.label != BASELINE) == Counter({label: 1 for label in changes})
    assert all(split_of(c) == "validate" for c in quick if c.label != BASELINE)    # scored out of sample
    per_entry = Counter(entry_of(c) for c in quick if c.label != BASELINE)
    assert len(per_entry) == 3 and max(per_entry.values()) - min(per_entry.values()) <= 1   # spread evenly
    assert {c.workload for c in quick if split_of(c) == "validate"} == {"resnet50", "bert-base", "yolov8n"}
    assert quick == [c for c in cells if c in quick]                                # the matrix's order


def test_the_rule_follows_the_matrix_not_a_list(cells):
    """Dropping a validate entry re-spreads the changes over the ones left (a rule, not a hand list)."""
    yolo = [c for c in cells if c.workload != "yolov8n"]
    quick = quick_cells(yolo)
    assert len(quick) == 4 + 7 and all(c.workload != "yolov8n" for c in quick)
    assert Counter(entry_of(c) for c in quick if c.label != BASELINE).most_common(1)[0][1] == 4
    with pytest.raises(ValueError, match="no validate entries"):
        quick_cells([c for c in cells if not c.overrides])


def run_args(tmp_path: Path, full: bool) -> Namespace:
    return Namespace(profile="cpu", out=str(tmp_path), json=False, resume=False, full=full, skip=None, locked=False)


@pytest.mark.parametrize("full", [False, True])
def test_validate_measures_the_subset_in_three_processes_or_everything_with_full(tmp_path, monkeypatch, cells, full):
    seen = {}

    def fake_run_matrix(matrix, **kwargs):
        seen.update(kwargs, env={k: os.environ.get(k) for k in command.QUICK_PROTOCOL})
        return SimpleNamespace(path=tmp_path / f"{kwargs['run_id']}.jsonl")

    for name in command.QUICK_PROTOCOL:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(command, "run_matrix", fake_run_matrix)
    path = command.run_real(tmp_path, resume=False, progress=False, full=full)
    if full:
        assert seen["only"] is None and seen["run_id"] == command.RUN_ID
        assert seen["env"]["MSBENCH_MEASURE_MAX_PROCESSES"] is None            # the protocol's own (up to 6)
    else:
        assert seen["only"] == {c.id for c in quick_cells(cells)} and path.name == f"{command.RUN_ID}-quick.jsonl"
        assert seen["env"]["MSBENCH_MEASURE_MAX_PROCESSES"] == seen["env"]["MSBENCH_MEASURE_PROCESSES"] == "3"


def test_full_is_refused_for_a_published_runs_profile(tmp_path, capsys):
    from msbench.cli import main

    assert main(["validate", "--profile", "ascend910a", "--full", "--out", str(tmp_path)]) == 2
    assert "--full=True is not allowed; allowed: only with a cpu profile" in capsys.readouterr().err


def test_median_interval_is_the_exact_order_statistic_interval():
    values = [0.01 * k for k in range(1, 11)]            # n = 10: ranks 2 and 9 (coverage 97.9%)
    assert median_interval(values) == pytest.approx([0.02, 0.09])
    assert median_interval(list(reversed(values))) == median_interval(values)
    assert median_interval([0.3, 0.1, 0.2]) == pytest.approx([0.1, 0.3])   # too few for 95%: the full range
    assert median_interval([0.1, 0.2]) is None


def test_spearman_interval_is_seeded_and_narrows_with_agreement():
    xs = list(range(12))
    close = [x + (0.5 if x % 3 == 0 else -0.4) for x in xs]                 # monotone: rho 1
    noisy = [3, 1, 4, 0, 5, 9, 2, 6, 5, 3, 8, 7]
    assert spearman_interval(xs, close) == spearman_interval(xs, close) == pytest.approx([1.0, 1.0])
    lo, hi = spearman_interval(xs, noisy)
    assert -1 <= lo < 0.6 < hi <= 1 and spearman_interval(xs, noisy) == [lo, hi]
    assert spearman_interval([1, 2], [1, 2]) is None and spearman_interval([1, 2, 3], [4, 4, 4]) is None


def comparison(measured: float, predicted: float) -> Comparison:
    return Comparison(cell_id="x", workload="w", overrides="-", label="base", split="validate",
                      measured_step_s=measured, predicted_step_s=predicted, step_error=predicted / measured - 1,
                      measured_memory_bytes=100, predicted_memory_bytes=110, memory_error=0.1, bound="compute")


def test_the_summary_carries_each_statistic_with_its_interval():
    s = summarize([comparison(m, m * (1 + e)) for m, e in [(1, 0.1), (2, -0.2), (3, 0.05), (4, 0.3), (5, -0.1),
                                                            (6, 0.15), (7, 0.0)]])
    assert s["step_median_abs_error"] == pytest.approx(0.1)
    lo, hi = s["step_median_abs_error_ci95"]
    assert lo <= 0.1 <= hi and lo == pytest.approx(0.0) and hi == pytest.approx(0.3)   # n = 7: the full range
    assert s["step_spearman_ci95"][0] <= s["step_spearman"] <= s["step_spearman_ci95"][1]
    assert s["memory_median_abs_error_ci95"] == pytest.approx([0.1, 0.1])
    assert command.with_ci(s, "step_median_abs_error", ".1%") == "10.0% [95%: 0.0% to 30.0%]"


def test_subset_check_sets_the_subset_beside_the_full_run(monkeypatch, cells):
    """subset_check on a committed run (predictions faked): the subset's validate cells against all 24."""
    from hardware.validation import subset_check

    errors = {c.id: 0.02 * (i % 9) - 0.07 for i, c in enumerate(cells)}
    records = [SimpleNamespace(cell=c) for c in cells]

    def fake_compare(record, profile):
        c = record.cell
        measured = 0.01 * (1 + len(c.id) + int(c.id, 16) % 97)
        return dataclasses.replace(comparison(measured, measured * (1 + errors[c.id])), split=split_of(c), cell_id=c.id)

    monkeypatch.setattr(subset_check, "measured_records", lambda path: records)
    monkeypatch.setattr(subset_check, "compare", fake_compare)
    result = subset_check.check("cpu", Path("unused.jsonl"))
    assert result.full["cells"] == 24 and result.subset["cells"] == 10
    full_median = sorted(abs(errors[c.id]) for c in cells if c.overrides)[11:13]
    assert result.full["step_median_abs_error"] == pytest.approx(sum(full_median) / 2)
    assert result.within("step_median_abs_error") == (
        result.subset["step_median_abs_error_ci95"][0] <= result.full["step_median_abs_error"]
        <= result.subset["step_median_abs_error_ci95"][1])
    assert subset_check.line(result).startswith("| `cpu` | 24: ")
