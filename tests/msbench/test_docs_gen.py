"""The docs' generated pages are what the code prints now: a stale committed page fails here (and so CI).

The fast pages (knobs, hardware, accuracy: no MindSpore) are compared whole, and the workload table without its
size columns, in `make test-fast`; the validation pages (a prediction of every published run: minutes with a cold
cache) and the workload table's sizes (a compile of every full network) by the digest of their inputs that each of
these slow pages records, so a page whose code changed after it was written fails there, and so `make test` and CI.
The `long` tier (`make test-long`) computes the slow pages again and compares them whole.
`python -m msbench.docs_gen --validation` regenerates them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from msbench import docs_gen
from msbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = [page for page in docs_gen.PAGES if page.fast]


def test_the_fast_generated_pages_are_current():
    assert {p.file for p in FAST} == {"knobs.md", "hardware.md", "accuracy.md", "conventions.md"}
    stale = docs_gen.stale_pages(FAST, ROOT)
    assert not stale, f"stale pages {stale}: regenerate with `python -m msbench.docs_gen --fast` and commit them"


def test_a_page_that_differs_from_the_code_is_reported_stale(tmp_path, capsys):
    (tmp_path / docs_gen.GENERATED).mkdir(parents=True)
    assert docs_gen.main(["--fast", "--root", str(tmp_path)]) == 0
    fast = ["--check", *(p.file.removesuffix(".md") for p in FAST), "--root", str(tmp_path)]
    assert docs_gen.main(fast) == 0
    page = tmp_path / docs_gen.GENERATED / "knobs.md"
    page.write_text(page.read_text().replace("| `mode` |", "| `mode2` |"))
    capsys.readouterr()
    assert docs_gen.main(fast) == 1
    assert "stale: docs/generated/knobs.md" in capsys.readouterr().out
    capsys.readouterr()
    assert docs_gen.main(["--check", "--fast", "--root", str(tmp_path)]) == 1    # and the slow pages are missing
    assert "stale: docs/generated/validation-ascend910a.md" in capsys.readouterr().out
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
    """The page with its params and gflops cells blanked (columns 5 and 6 of the table) and without the digest
    of its inputs (checked on its own below)."""
    def blank(line: str) -> str:
        if not line.startswith("| `"):
            return line
        cells = line.split(" | ")
        cells[4:6] = ["", ""]
        return " | ".join(cells)

    return "\n".join(blank(line) for line in page.split("\n") if not docs_gen.DIGEST_LINE.match(line))


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


def test_the_slow_pages_were_written_by_the_code_as_it_is_now():
    slow = [p for p in (*docs_gen.PAGES, *docs_gen.VALIDATION_PAGES) if not p.fast]
    assert all(p.digest for p in slow)
    assert [p.file for p in slow] == ["workloads.md", "validation-ascend910a.md", "validation-ascend910b.md",
                                      "op-tables.md"]
    stale = docs_gen.digest_stale_pages(slow, ROOT)
    assert not stale, (f"pages {stale} were computed from other sources than these: regenerate with "
                       "`python -m msbench.docs_gen --validation` and commit them")


def test_an_edit_of_any_input_changes_the_digest_and_a_page_without_one_is_stale(tmp_path):
    for tree in docs_gen.INPUT_TREES:
        (tmp_path / tree).mkdir()
    model = tmp_path / "hardware" / "model.py"
    model.write_text("STEP = 1\n")
    (tmp_path / "workloads" / "notes.md").write_text("not an input\n")
    before = docs_gen.inputs_digest(tmp_path)
    (tmp_path / "workloads" / "notes.md").write_text("still not an input\n")
    assert docs_gen.inputs_digest(tmp_path) == before
    model.write_text("STEP = 2\n")
    assert docs_gen.inputs_digest(tmp_path) != before
    page = docs_gen.VALIDATION_PAGES[0]
    (tmp_path / docs_gen.GENERATED).mkdir(parents=True)
    written = tmp_path / docs_gen.GENERATED / page.file
    written.write_text(f"# t\n\n{docs_gen.digest_comment(docs_gen.inputs_digest())}\n")
    assert docs_gen.digest_stale_pages([page], tmp_path) == []
    written.write_text(f"# t\n\n{docs_gen.digest_comment(before)}\n")
    assert docs_gen.digest_stale_pages([page], tmp_path) == [page.file]
    written.write_text("# t\n")
    assert docs_gen.digest_stale_pages([page], tmp_path) == [page.file]


@pytest.mark.slow
@pytest.mark.long
def test_the_workload_page_is_current_with_its_sizes():
    """What `python -m msbench.docs_gen --check workloads` checks, on this run's shared cache."""
    page = next(p for p in docs_gen.PAGES if not p.fast)
    assert page.file == "workloads.md"
    assert not docs_gen.stale_pages([page], ROOT), "regenerate with `python -m msbench.docs_gen workloads` and commit it"


@pytest.mark.slow
@pytest.mark.long
def test_the_validation_pages_are_current_whole():
    """The validation pages and the op-tables page predicted again: what `python -m msbench.docs_gen --check --validation` checks."""
    stale = docs_gen.stale_pages(docs_gen.VALIDATION_PAGES, ROOT)
    assert not stale, f"stale pages {stale}: regenerate with `python -m msbench.docs_gen --validation` and commit them"
