"""`msbench report RUN_OR_DIR... [--html FILE] [--md FILE] [--baseline COMMIT|RUN]`."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from msbench.errors import ConfigError
from msbench.outputs import check_file, write_atomic
from msbench.report.build import Options, build_report
from msbench.report.load import load_inputs
from msbench.report.render import html_page, markdown
from msbench.report.reuse import pages, report_key
from msbench.report.section import Section

DEFAULT_DIR = Path("results/reports")
TITLE = "msbench report"


def write_report(inputs: list[str], html_path: str | None, md_path: str | None, options: Options) -> list[Path]:
    """Load, analyse, render; without --html/--md both go to results/reports/report-<time>.*."""
    if options.memory_cap_gib is not None and options.memory_cap_gib <= 0:
        raise ConfigError("--memory-cap", options.memory_cap_gib, "a positive number of GiB")
    if options.tolerance_pp < 0:
        raise ConfigError("--accuracy-tolerance", options.tolerance_pp, "a number of pp >= 0")
    if html_path is None and md_path is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        html_path, md_path = str(DEFAULT_DIR / f"report-{stamp}.html"), str(DEFAULT_DIR / f"report-{stamp}.md")
    for option, path in (("--html", html_path), ("--md", md_path)):
        if path is not None:
            check_file(option, path)           # before the records are read: '' or a directory is refused
    loaded = load_inputs(inputs)
    options = dataclasses.replace(options, plots=bool(html_path))
    paths = {fmt: path for fmt, path in (("html", html_path), ("md", md_path)) if path is not None}
    preamble = (f"Generated {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} from "
                f"{len(loaded.runs.records)} record(s) and {len(loaded.asv_dirs)} asv results directory(ies).")
    built: list[Section] = []

    def sections() -> list[Section]:           # built once, and only when a page is rendered
        if not built:
            built.extend(build_report(loaded, options))
        return built

    renderers = {"html": lambda lines: html_page(TITLE, sections(), lines),
                 "md": lambda lines: markdown(TITLE, sections(), lines)}
    texts = pages(report_key(loaded, dataclasses.asdict(options), list(paths)),
                  {fmt: renderers[fmt] for fmt in paths}, preamble)
    return [write_atomic(path, texts[fmt]) for fmt, path in paths.items()]


def report_command(args: argparse.Namespace) -> int:
    options = Options(memory_cap_gib=args.memory_cap, tolerance_pp=args.accuracy_tolerance,
                      baselines=tuple(args.baseline or ()))
    for path in write_report(args.inputs, args.html, args.md, options):
        print(path)
    return 0
