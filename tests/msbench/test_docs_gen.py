"""The docs' generated pages are what the code prints now: a stale committed page fails here (and so CI).

The fast pages (knobs, hardware, accuracy: no MindSpore) are compared whole, and the workload table without its
size columns, in `make test-fast`. The slow pages (the workload table with its sizes: a compile of every full
network; the validation tables: a prediction of every published run; minutes with a cold cache) are compared whole
by a slow test, so `make test` and CI fail on any stale page. `python -m msbench.docs_gen [--validation]`
regenerates them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from msbench import docs_gen
from msbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = [page for page in docs_gen.PAGES if page.fast]


def test_the_fast_generated_pages_are_current():
    assert {p.file for p in FAST} == {"knobs.md", "hardware.md", "accuracy.md"}
    stale = docs_gen.stale_pages(FAST, ROOT)
    assert not stale, f"stale pages {stale}: regenerate with `python -m msbench.docs_gen --fast` and commit them"


def test_a_page_that_differs_from_the_code_is_reported_stale(tmp_path, capsys):
    (tmp_path / docs_gen.GENERATED).mkdir(parents=True)
    assert docs_gen.main(["--fast", "--root", str(tmp_path)]) == 0
    assert docs_gen.main(["--check", "--fast", "--root", str(tmp_path)]) == 0
    page = tmp_path / docs_gen.GENERATED / "knobs.md"
    page.write_text(page.read_text().replace("| `mode` |", "| `mode2` |"))
    capsys.readouterr()
    assert docs_gen.main(["--check", "--fast", "--root", str(tmp_path)]) == 1
    assert "stale: docs/generated/knobs.md" in capsys.readouterr().out
    page.unlink()
    assert docs_gen.stale_pages(FAST, tmp_path) == ["knobs.md"]


def test_list_md_prints_the_tables_the_pages_hold(capsys):
    for what in ("knobs", "hardware"):
        assert main(["list", what, "--md"]) == 0
        table = capsys.readouterr().out
        assert table.startswith("| name |") and table in (ROOT / docs_gen.GENERATED / f"{what}.md").read_text()


def test_a_table_cell_is_escaped_and_lists_are_joined():
    assert docs_gen.md_table(["a", "b"], [["x|y", [None, 1]], [None, "two\nlines"]]) == (
        "| a | b |\n|---|---|\n| x\\|y | none, 1 |\n|  | two lines |\n")


def without_sizes(page: str) -> str:
    """The page with its params and gflops cells blanked (columns 5 and 6 of the table)."""
    def blank(line: str) -> str:
        if not line.startswith("| `"):
            return line
        cells = line.split(" | ")
        cells[4:6] = ["", ""]
        return " | ".join(cells)

    return "\n".join(blank(line) for line in page.split("\n"))


def test_the_workload_page_is_current_but_for_the_sizes(monkeypatch):
    """Every column but the sizes, which need a compile of each full network (minutes cold): a workload added,
    renamed or given another preset, input or metric makes the page stale here."""
    from msbench.commands import summary
    from workloads.registry import get_workload

    def row_without_compile(name: str) -> dict:
        workload = get_workload(name)
        preset = workload.preset(summary.FULL)
        return {"name": workload.name, "family": workload.family, "presets": sorted(workload.presets()),
                "input_shape": summary.input_shape(workload, preset), "params": None, "gflops": None,
                "metric": workload.metric_name}

    monkeypatch.setattr(summary, "workload_row", row_without_compile)
    page = next(p for p in docs_gen.PAGES if p.file == "workloads.md")
    committed = (ROOT / docs_gen.GENERATED / page.file).read_text()
    assert without_sizes(committed) == without_sizes(docs_gen.render(page)), (
        "docs/generated/workloads.md is stale: regenerate with `python -m msbench.docs_gen workloads`")


@pytest.mark.slow
def test_the_slow_generated_pages_are_current():
    """The workload page whole and both validation pages: what `python -m msbench.docs_gen --check workloads
    validation-ascend910a validation-ascend910b` checks, on this run's shared cache."""
    slow = [page for page in (*docs_gen.PAGES, *docs_gen.VALIDATION_PAGES) if not page.fast]
    assert {p.file for p in slow} == {"workloads.md", "validation-ascend910a.md", "validation-ascend910b.md"}
    stale = docs_gen.stale_pages(slow, ROOT)
    assert not stale, f"stale pages {stale}: regenerate with `python -m msbench.docs_gen --validation` and commit them"
