"""The docs' generated pages are what the code prints now: a stale committed page fails here (and so CI).

The fast pages (knobs, hardware: no MindSpore) are compared whole. The workload table compiles every full
network once (minutes with a cold cache), so only its list of names is checked here; the validation tables
predict every published run (minutes) and are not checked. `python -m msbench.docs_gen --check workloads
validation-ascend910a validation-ascend910b` compares them whole; `python -m msbench.docs_gen [--validation]`
regenerates them.
"""

from __future__ import annotations

from pathlib import Path

from msbench import docs_gen
from msbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = [page for page in docs_gen.PAGES if page.fast]


def test_the_fast_generated_pages_are_current():
    assert {p.file for p in FAST} == {"knobs.md", "hardware.md"}
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


def test_the_workload_page_lists_every_registered_workload():
    """The sizes need compiles (regenerate the page); its rows must at least name every workload there is."""
    from workloads.registry import WORKLOADS, ZOOS

    page = (ROOT / docs_gen.GENERATED / "workloads.md").read_text()
    names = [line.split("|")[1].strip().strip("`") for line in page.splitlines() if line.startswith("| `")]
    assert names == [*WORKLOADS, *(f"{zoo}:<model>" for zoo in ZOOS)], (
        "docs/generated/workloads.md is stale: regenerate with `python -m msbench.docs_gen workloads`")
