"""A report's pages, rendered once per content: a second `msbench report` of the same records renders nothing again.

A warm `make bench` predicts nothing (its records are current) but used to rebuild the whole report: the plots
and the claims took about 5.5 s of its 9-12 s. The pages are a function of the run files' bytes and names, the
commits their records came from (in the order the report puts them), the options, the formats written, the
report's code (the `msbench` package, and `hardware/model/opclass.py`, which the per-op section reads) and the
versions of the libraries that draw and format them; those are the cache key. Only the preamble line, which
says when the report was generated, differs between two renderings: a cached page holds `MARK` in its place.
A report that also reads asv results or a `--baseline` is rendered afresh (it reads more than this key covers).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Callable, Mapping, Sequence

from msbench.cache import cached, content_key, file_hash
from msbench.freshness import files_digest
from msbench.provenance import package_version
from msbench.report.load import Inputs
from msbench.resources import package_dir

CACHE_KIND = "report"
MARK = "msbench-report-preamble-line"     # where a cached page's preamble line goes
LIBRARIES = ("pandas", "numpy", "matplotlib", "tabulate")
Renderer = Callable[[Sequence[str]], str]  # preamble lines -> the page


def report_key(loaded: Inputs, options: Mapping[str, object], formats: Sequence[str]) -> str | None:
    """The content key of the pages, or None where the report reads what the key does not cover."""
    if loaded.asv_dirs or options.get("baselines"):
        return None
    code = files_digest([package_dir("msbench"), package_dir("hardware") / "model" / "opclass.py"])
    runs = [(source, file_hash(Path(source))) for source in loaded.sources]
    versions = {name: package_version(name) for name in LIBRARIES}
    return content_key("report/1", code, versions, dict(options), sorted(formats), runs, loaded.runs.commits())


def filled(page: str, fmt: str, preamble: str) -> str:
    """A cached page with its preamble line, as the renderer writes it (escaped in HTML)."""
    return page.replace(MARK, html.escape(preamble) if fmt == "html" else preamble)


def pages(key: str | None, renderers: Mapping[str, Renderer], preamble: str) -> dict[str, str]:
    """Format -> page: from the cache under `key`, or rendered (and stored when there is a key)."""
    if key is None:
        return {fmt: render([preamble]) for fmt, render in renderers.items()}
    entry, _ = cached(CACHE_KIND, key, lambda: {fmt: render([MARK]) for fmt, render in renderers.items()},
                      validate=lambda e: set(e) == set(renderers) and all(MARK in v for v in e.values()))
    return {fmt: filled(entry[fmt], fmt, preamble) for fmt in renderers}
