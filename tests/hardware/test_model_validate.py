"""`msbench validate` bookkeeping: the fit/validate split, error statistics, goals; and the fitter."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hardware.calibration.fit import FitCase, fit_memory, fit_time, time_residuals, with_values  # noqa: E402
from hardware.model.profile import load_profile  # noqa: E402
from hardware.calibration.cpu_runs import split_of  # noqa: E402
from hardware.validation.cpu import (VALIDATION_MATRIX, Comparison, cpu_identity, cpu_warning, goals_met,  # noqa: E402
                                     summarize)
from model_graphs import FakeHost, mlp_step, many_small  # noqa: E402
from msbench.matrix_file import load_matrix  # noqa: E402
from msbench.settings import Settings  # noqa: E402


def row(measured: float, predicted: float, split: str = "validate", mem: int | None = 100) -> Comparison:
    return Comparison(cell_id="x", workload="w", overrides="-", label="base", split=split,
                      measured_step_s=measured, predicted_step_s=predicted, step_error=predicted / measured - 1,
                      measured_memory_bytes=mem, predicted_memory_bytes=110,
                      memory_error=None if mem is None else 110 / mem - 1, bound="compute")


def test_split_is_disjoint_and_covers_both_sides():
    cells = load_matrix(VALIDATION_MATRIX).expand().cells()
    splits = {c.id: split_of(c) for c in cells}
    assert set(splits.values()) == {"fit", "validate"}
    fit = [c for c in cells if splits[c.id] == "fit"]
    assert all(not c.overrides for c in fit) and all(c.overrides for c in cells if splits[c.id] == "validate")
    assert {c.workload for c in cells if splits[c.id] == "validate"} - {c.workload for c in fit}  # an unseen family


@pytest.mark.slow
def test_summary_statistics_and_goals():
    rows = [row(1.0, 1.1), row(2.0, 1.8), row(3.0, 3.6), row(4.0, 4.0, mem=None)]
    s = summarize(rows)
    assert s["step_median_abs_error"] == pytest.approx(0.10) and s["step_spearman"] == pytest.approx(1.0)
    assert s["memory_cells"] == 3 and s["memory_median_abs_error"] == pytest.approx(0.10)
    assert goals_met(s) == {"step_median_abs_error": True, "step_spearman": True, "memory_median_abs_error": True}
    bad = summarize([row(1.0, 3.0, mem=50), row(2.0, 1.0, mem=50), row(3.0, 2.0, mem=50)])
    assert not any(goals_met(bad).values())


def measured_on(*models):
    return [SimpleNamespace(provenance={"cpu": {"model": m, "cores": 2}}) for m in models]


def test_a_comparison_says_when_the_run_measured_another_cpu_than_the_fit():
    """The cpu profile predicts the CPU it was fitted on; this machine kind has been an AMD EPYC and an
    Intel Xeon, so validate names both when they differ and stays silent when they agree."""
    fitted = load_profile("cpu").profile.fitted_cpu
    assert fitted and cpu_warning(cpu_identity("cpu", measured_on(fitted, fitted)), "cpu") is None
    other = cpu_identity("cpu", measured_on("Intel(R) Xeon(R) Processor"))
    assert other["same_cpu"] is False and other["measured_cpu"] == ["Intel(R) Xeon(R) Processor"]
    warning = cpu_warning(other, "cpu")
    assert f"fitted on {fitted}" in warning and "measured Intel(R) Xeon(R) Processor" in warning
    assert not cpu_identity("cpu", measured_on(fitted, "Intel(R) Xeon(R) Processor"))["same_cpu"]   # a mixed run


@pytest.mark.slow
def test_fit_recovers_known_parameters():
    """Fake 'measurements' made by a known profile are fitted back from the fitter's fixed start (the
    truth's Vector efficiency mid-range, where these five cases can tell it from dispatch)."""
    from hardware.model.profile import EfficiencyTable

    truth = with_values(load_profile("cpu"), {"launch.pynative_us": 40.0, "launch.graph_o0_us": 8.0,
                                              "vector.efficiency": EfficiencyTable(((0, 0.3),))})
    cases = []
    for g, settings in [(mlp_step(64, width=256), Settings(mode="graph")), (mlp_step(256, width=512), Settings(mode="graph")),
                        (many_small(300), Settings(mode="pynative")), (many_small(300), Settings(mode="graph")),
                        (mlp_step(16, width=128), Settings(mode="pynative"))]:
        from hardware.model.predict import predict

        p = predict(g, settings, truth, FakeHost())
        cases.append(FitCase(g, settings, FakeHost(), p.step_time_s, p.peak_memory_bytes))
    start = with_values(truth, {"launch.pynative_us": 5.0, "launch.graph_o0_us": 50.0})
    fitted = fit_time(start, cases)
    assert max(abs(time_residuals(fitted, cases))) < 0.02 < max(abs(time_residuals(start, cases)))
    assert fitted.launch.pynative_us == pytest.approx(40.0, rel=0.1)
    mem = fit_memory(with_values(truth, {"memory.fragmentation": 0.0, "memory.workspace_mib": 0.0}), cases)
    assert mem.memory.fragmentation == pytest.approx(truth.memory.fragmentation, abs=0.01)
