"""The independent check's cases (tools/independent_check): every case cites its source and names a config
that msbench's importer reads as the published network's shape, and the medians are computed only over
cases kept in them. The predictions themselves are the script's to print (docs/validation.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from msbench.importers import import_config

ROOT = Path(__file__).resolve().parents[2] / "tools" / "independent_check"
SPEC = importlib.util.spec_from_file_location("independent_check_run", ROOT / "run.py")
run = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = run                                  # dataclasses look their module up
SPEC.loader.exec_module(run)
CASES = run.load_cases(ROOT / "cases.toml")


def test_the_check_covers_eight_cases_of_three_families_beyond_llama2():
    assert len(CASES) >= 8
    assert len({c.family for c in CASES}) >= 3
    assert not any("llama2" in c.name or "llama-2" in c.name for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_cites_its_source_and_its_config_imports_as_an_llm(case):
    assert case.source.startswith("https://github.com/mindspore-lab/mindformers/blob/v1.3.0/")
    imported = import_config(case.config)
    assert imported.workload in ("llm", "llama3-8b", "llama2-7b") or imported.workload.startswith("llm")
    assert imported.knobs.get("devices", 1) == case.cards     # the card count of the published run


def test_medians_leave_out_excluded_cases():
    kept, left = (run.Case(name=n, family="F", source="s", cards=8, published=100.0, config=Path("x"),
                           chip="ascend910b", note="", in_median=m) for n, m in (("a", True), ("b", False)))
    lines = run.table([run.Outcome(kept, predicted=110.0, peak_gib=1.0, capacity_gib=58.0, oom=False, devices=8,
                                   parameters=10**9),
                       run.Outcome(left, predicted=500.0, peak_gib=1.0, capacity_gib=58.0, oom=False, devices=8,
                                   parameters=10**9)])
    assert any(line.startswith("median |error| over 1 predicted cases") and "10.0%" in line for line in lines)
