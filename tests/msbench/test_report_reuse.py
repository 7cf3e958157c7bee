"""A report of the same run files, code and options is rendered once: the second reads its pages from the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from report_fixtures import claims_records, write_asv  # noqa: E402

from msbench.report import cli as report_cli  # noqa: E402
from msbench.report.build import Options  # noqa: E402
from msbench.report.reuse import MARK, filled  # noqa: E402


def run_file(path: Path, scale: float = 1.0) -> Path:
    path.write_text("".join(r.to_json_line() for r in claims_records(scale=scale)))
    return path


def without_preamble(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "Generated " not in line)


def built_count(monkeypatch) -> list[int]:
    calls = [0]
    real = report_cli.build_report

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(report_cli, "build_report", counting)
    return calls


def test_a_second_report_reads_its_pages_and_equals_a_fresh_one(tmp_path, private_cache, monkeypatch):
    runs = run_file(tmp_path / "nightly.jsonl")
    calls = built_count(monkeypatch)
    first = report_cli.write_report([str(runs)], str(tmp_path / "a.html"), str(tmp_path / "a.md"), Options())
    second = report_cli.write_report([str(runs)], str(tmp_path / "b.html"), str(tmp_path / "b.md"), Options())
    assert calls[0] == 1                                     # the second built nothing
    for a, b in zip(first, second):
        assert MARK not in b.read_text() and "Generated " in b.read_text()
        assert without_preamble(a.read_text()) == without_preamble(b.read_text())


def test_another_run_file_content_or_format_is_rendered_again(tmp_path, private_cache, monkeypatch):
    runs = run_file(tmp_path / "nightly.jsonl")
    calls = built_count(monkeypatch)
    report_cli.write_report([str(runs)], None, str(tmp_path / "a.md"), Options())
    report_cli.write_report([str(runs)], str(tmp_path / "a.html"), str(tmp_path / "b.md"), Options())
    assert calls[0] == 2                                     # HTML was not among the cached formats
    run_file(runs, scale=2.0)                                # same name, new records
    report_cli.write_report([str(runs)], None, str(tmp_path / "c.md"), Options())
    assert calls[0] == 3
    assert (tmp_path / "a.md").read_text() != (tmp_path / "c.md").read_text()
    report_cli.write_report([str(runs)], None, str(tmp_path / "d.md"), Options(tolerance_pp=0.5))
    assert calls[0] == 4


@pytest.mark.parametrize("extra", ["asv", "baseline"])
def test_reports_that_read_asv_results_or_a_baseline_are_never_reused(tmp_path, private_cache, monkeypatch, extra):
    runs = run_file(tmp_path / "nightly.jsonl")
    inputs = [str(runs)]
    options = Options()
    if extra == "asv":
        inputs.append(str(write_asv(tmp_path / "asv", "a" * 40, 1, [1000.0, 1100.0])))
    else:
        options = Options(baselines=(str(run_file(tmp_path / "before.jsonl", scale=0.5)),))
    calls = built_count(monkeypatch)
    for name in ("a.md", "b.md"):
        report_cli.write_report(inputs, None, str(tmp_path / name), options)
    assert calls[0] == 2
    assert not (private_cache / "report").exists() or not any((private_cache / "report").iterdir())


def test_the_preamble_is_escaped_in_html_as_the_renderer_does():
    assert filled(f"<p>{MARK}</p>", "html", "a < b") == "<p>a &lt; b</p>"
    assert filled(f"x\n{MARK}\n", "md", "a < b") == "x\na < b\n"
