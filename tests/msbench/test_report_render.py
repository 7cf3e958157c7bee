"""`msbench report` end to end: files on disk in, a self-contained HTML and Markdown out; partial
inputs, commit diffs and asv results."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_fixtures import claims_records, record, write_asv  # noqa: E402

from msbench.cli import main  # noqa: E402
from msbench.report.build import Options, build_report  # noqa: E402
from msbench.report.load import load_inputs  # noqa: E402
from msbench.store import RunStore  # noqa: E402

SECTIONS = ["0. Inputs", "1. Knob effects", "2. Trade-offs", "3. Best settings", "4. Claims", "5. Commit diff"]


def write_run(path: Path, records) -> Path:
    store = RunStore(path)
    for rec in records:
        store.append(rec)
    return path


def report(tmp_path: Path, *inputs: str, extra: tuple[str, ...] = (), with_html: bool = True) -> tuple[str, str]:
    html, md = tmp_path / "out" / "r.html", tmp_path / "out" / "r.md"
    out = ["--html", str(html)] if with_html else []
    assert main(["report", *inputs, *out, "--md", str(md), *extra]) == 0
    return html.read_text() if with_html else "", md.read_text()


@pytest.mark.slow
def test_full_report_is_self_contained(tmp_path):
    run = write_run(tmp_path / "runs" / "claims.jsonl",
                    claims_records() + claims_records("model:ascend910a", scale=0.5))
    html, md = report(tmp_path, str(run.parent), extra=("--memory-cap", "15"))
    for title in SECTIONS:
        assert title in html and f"## {title}" in md
    assert html.count("data:image/png;base64,") >= 4
    assert not re.search(r"""(src|href)=["'](https?:|//|file:)""", html), "the HTML must not fetch anything"
    assert "<script" not in html
    # every linked cell id has its anchor in the appendix
    ids = set(re.findall(r'href="#cell-([0-9a-f]{12})"', html))
    assert ids and ids <= set(re.findall(r'id="cell-([0-9a-f]{12})"', html))
    claims = md.split("## 4. Claims")[1].split("## 5.")[0]
    assert claims.count("| holds") >= 12 and "model:ascend910a" in claims
    assert "results of one commit only" in md


@pytest.mark.slow
@pytest.mark.parametrize("records, says", [
    ([], "no msbench records"),
    ([record(status="failed", reason="Traceback: boom")], "baseline cell is failed"),
    ([record(thr=10.0, peak_gib=1.0)], "a single cell"),
    ([record(thr=10.0, peak_gib=1.0), record(thr=20.0, peak_gib=1.0, amp_level="O2")], "no record has accuracy"),
    ([record(thr=10.0), record(status="unsupported", reason="sink on CPU", sink=True)], "1 of 2 cells are not ok"),
])
def test_partial_inputs_say_what_is_missing(tmp_path, records, says):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "r.jsonl").touch()                # an empty run file; an empty directory is an error (test_faults)
    write_run(folder / "r.jsonl", records)
    html, md = report(tmp_path, str(folder))
    assert says in md and says in html
    assert "no cells: needs" in md or not records


def commit_pair():
    before = claims_records(commit="a" * 40, started=1.0)
    after = claims_records(commit="b" * 40, started=2.0, provenance={"numpy": "2.0.0"})
    after = [r for r in after if r.cell.label != "sink=true"]
    slower = next(r for r in after if r.cell.label == "base")
    slower.metrics.throughput *= 0.8
    faster = next(r for r in after if r.cell.label == "amp_level=O2")
    faster.metrics.peak_memory_bytes //= 2
    broken = next(r for r in after if r.cell.label == "workers=1")
    after.remove(broken)
    after.append(record(status="failed", reason="crash", commit="b" * 40, started=2.0, workers=1,
                        provenance={"numpy": "2.0.0"}))
    return before, after


@pytest.mark.slow
def test_commit_diff_is_direction_aware_regressions_first(tmp_path):
    before, after = commit_pair()
    inputs = load_inputs([write_run(tmp_path / "a.jsonl", before), write_run(tmp_path / "b.jsonl", after)])
    sections = build_report(inputs, Options(plots=False))
    diff = next(s for s in sections if s.anchor == "diff")
    table, env = diff.tables[0].frame, diff.tables[1].frame
    bad = table["flag"].isin(["regression", "lost"])
    assert bad.iloc[: bad.sum()].all(), "regressions come first"
    lost = table[table["flag"] == "lost"]
    assert set(lost["variant"]) == {"workers=1"}
    thr = table[(table["variant"] == "base") & (table["metric"] == "throughput (%)")].iloc[0]
    assert (thr["flag"], thr["direction"]) == ("regression", "worse") and thr["change"] == pytest.approx(-20.0)
    sps = table[(table["variant"] == "base") & (table["metric"] == "seconds_per_sample (%)")].iloc[0]
    assert sps["flag"] == "regression" and sps["change"] == pytest.approx(25.0)
    mem = table[(table["variant"] == "amp_level=O2") & (table["metric"] == "peak_memory (%)")].iloc[0]
    assert (mem["flag"], mem["direction"]) == ("improvement", "better") and mem["change"] == pytest.approx(-50, abs=0.01)
    base_id = next(r.cell_id for r in after if r.cell.label == "base")
    assert thr["cell_id"] == base_id
    assert env.iloc[0]["key"] == "numpy" and env.iloc[0]["after"] == "2.0.0"
    assert any("compares bbbbbbbbbb against aaaaaaaaaa" in n for n in sections[0].notes)
    # sections 1-4 describe the newer commit only
    effects = next(s for s in sections if s.anchor == "effects").tables[0].frame
    assert "sink=true" not in set(effects["label"])


@pytest.mark.slow
def test_baseline_by_commit_and_by_path(tmp_path):
    before, after = commit_pair()
    a, b = write_run(tmp_path / "a.jsonl", before), write_run(tmp_path / "b.jsonl", after)
    _, md = report(tmp_path, str(a), str(b), extra=("--baseline", "aaaa"), with_html=False)
    assert "regression" in md and "| numpy" in md
    _, md = report(tmp_path, str(b), extra=("--baseline", str(a)), with_html=False)
    assert "commit baseline: the records in" in md and "| numpy" in md
    _, md = report(tmp_path, str(b), extra=("--baseline", "ffff"), with_html=False)
    assert "no records of that commit" in md


def test_asv_results_are_summarised_and_diffed(tmp_path):
    root = tmp_path / "asv"
    write_asv(root, "1" * 40, 1000, [100.0, 50.0])
    write_asv(root, "2" * 40, 2000, [80.0, None])
    sections = build_report(load_inputs([root]), Options(plots=False))
    summary = sections[0].tables[-1].frame
    assert summary["value"].tolist()[0] == 80.0 and set(summary["status"]) == {"ok", "failed"}
    diff = next(s for s in sections if s.anchor == "diff")
    table = diff.tables[0].frame
    assert table["flag"].tolist() == ["regression", "lost"]
    assert table.iloc[0]["change"] == pytest.approx(-20.0) and table.iloc[0]["variant"] == "base"
    assert any("asv: 2222222222 against 1111111111" in n for n in diff.notes)
    _, md = report(tmp_path, str(root), extra=("--baseline", "1111"), with_html=False)
    assert "regression" in md


def test_bad_inputs_are_user_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    assert main(["report", str(tmp_path / "notes.txt")]) == 2
    assert main(["report", str(tmp_path), "--memory-cap", "-1"]) == 2
    assert "--memory-cap" in capsys.readouterr().err


@pytest.mark.slow
def test_default_output_paths(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "r.jsonl", [record(thr=1.0, peak_gib=1.0)])
    assert main(["report", "r.jsonl"]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(p).suffix for p in printed] == [".html", ".md"]
    assert all((tmp_path / p).is_file() and p.startswith("results/reports/") for p in printed)


@pytest.mark.slow
def test_markdown_only_draws_no_plots(tmp_path):
    run = write_run(tmp_path / "r.jsonl", claims_records())
    sections = build_report(load_inputs([run]), Options(plots=False))
    assert not any(s.figures for s in sections)
    assert any(s.figures for s in build_report(load_inputs([run]), Options()))


@pytest.mark.slow
def test_a_run_made_across_commits_is_one_side(tmp_path):
    records = claims_records()
    for i, rec in enumerate(records):
        rec.run_id = "claims"
        rec.started_at = float(i)
        rec.provenance["commit"] = "a" * 40 if i < 3 else "b" * 40
    sections = build_report(load_inputs([write_run(tmp_path / "r.jsonl", records)]), Options(plots=False))
    assert any("run claims was made across 2 commits" in n for n in sections[0].notes)
    assert len(sections[1].tables[0].frame) == len(records) - 1          # every cell against one base
    assert any("results of one commit only" in n for n in sections[5].notes)


def test_commits_follow_git_history_not_wall_time(tmp_path):
    from msbench.errors import UserError
    from msbench.gitrepo import first_parent_history, repo_root

    try:
        newer, older = first_parent_history(repo_root(Path(__file__).parent), "HEAD")[:2]
    except (UserError, ValueError):
        pytest.skip("needs a git checkout with two commits")
    late_old = record(thr=1.0, commit=older, started=2.0)          # an old commit benchmarked later
    early_new = record(thr=2.0, commit=newer, started=1.0)
    runs = load_inputs([write_run(tmp_path / "r.jsonl", [late_old, early_new])]).runs
    assert runs.commits() == [older, newer]


@pytest.mark.slow
def test_comparisons_across_commits_are_flagged(tmp_path):
    records = claims_records()
    for i, rec in enumerate(records):
        rec.run_id = "claims"
        rec.started_at = float(i)
        rec.provenance["commit"] = "a" * 40 if rec.cell.label == "base" else "b" * 40
    sections = build_report(load_inputs([write_run(tmp_path / "r.jsonl", records)]), Options(plots=False))
    effects = next(s for s in sections if s.anchor == "effects")
    assert any("9 cell(s) were made at another commit than the baseline (aaaaaaaaaa)" in n for n in effects.notes)
    claims = next(s for s in sections if s.anchor == "claims")
    assert any("pair cells made at different commits" in n for n in claims.notes)
