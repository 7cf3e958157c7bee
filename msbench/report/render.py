"""Markdown and one self-contained HTML file (plots as base64 PNG, CSS inline) from report sections."""

from __future__ import annotations

import base64
import html
import math
import re
from typing import Any, Sequence

import pandas as pd

from msbench.report.section import Section, Table

TITLES = {
    "speedup": "speed-up (×)", "memory_change_pct": "peak memory change (%)",
    "accuracy_delta_pp": "accuracy Δ (pp)", "accuracy_ci95_pp": "accuracy Δ 95% interval (pp)",
    "moved": "component that moved", "moved_ms": "its change (ms/step)",
    "peak_gib": "peak memory (GiB)", "throughput": "throughput (samples/s)", "over_tolerance": "over accuracy tolerance",
    "pareto": "Pareto-optimal", "cell_id": "cell", "admitted": "admissible cells", "step_time_s": "step (s)",
}
CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}tr:target{background:#fff3c4}caption{text-align:left;font-weight:600;padding:4px 0}
.note{color:#6d4c00;background:#fff8e1;padding:4px 8px;margin:3px 0;border-left:3px solid #f9a825}
.holds{background:#e8f5e9}.partly{background:#fffde7}.does-not-hold{background:#ffebee}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}figcaption{font-size:0.85em;color:#555}"""
ID_PATTERN = re.compile(r"\b[0-9a-f]{12}\b")


def format_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        size = abs(value)
        if size >= 1000:
            return f"{value:,.0f}"
        if size >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if size >= 0.01 or value == 0 else f"{value:.2e}"
    return str(value)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Strings for every cell, human column titles."""
    out = pd.DataFrame({col: [format_value(v) for v in frame[col]] for col in frame.columns}, columns=frame.columns)
    return out.rename(columns=lambda c: TITLES.get(c, c.replace("_", " ")))


def markdown(title: str, sections: Sequence[Section], preamble: Sequence[str]) -> str:
    lines = [f"# {title}", "", *preamble, ""]
    lines += [f"- [{s.title}](#{s.anchor})" for s in sections] + [""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        if section.intro:
            lines += [section.intro, ""]
        lines += [f"> {note}" for note in section.notes] + ([""] if section.notes else [])
        for table in section.tables:
            lines += [f"**{table.caption}**", ""]
            lines += [display(table.frame).to_markdown(index=False, disable_numparse=True) if not table.frame.empty else "_(empty)_", ""]
        if section.figures:
            lines += [f"_{len(section.figures)} plot(s) in the HTML report: "
                      + "; ".join(f.caption for f in section.figures) + "_", ""]
    return "\n".join(lines)


def link_ids(text: str) -> str:
    return ID_PATTERN.sub(lambda m: f'<a href="#cell-{m.group(0)}">{m.group(0)}</a>', html.escape(text))


def html_table(table: Table, row_anchor: str | None = None) -> str:
    shown = display(table.frame)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    link_at = {shown.columns[table.frame.columns.get_loc(c)] for c in table.links if c in table.frame.columns}
    body = []
    for i, (_, row) in enumerate(shown.iterrows()):
        cells = "".join(f"<td>{link_ids(v) if col in link_at else html.escape(v)}</td>" for col, v in row.items())
        verdict = table.frame.iloc[i].get("verdict") if "verdict" in table.frame.columns else None
        klass = f' class="{verdict.replace(" ", "-")}"' if isinstance(verdict, str) else ""
        anchor = f' id="cell-{table.frame.iloc[i][row_anchor]}"' if row_anchor else ""
        body.append(f"<tr{anchor}{klass}>{cells}</tr>")
    if not body:
        return f"<p><b>{html.escape(table.caption)}</b>: <i>(empty)</i></p>"
    return (f"<table><caption>{html.escape(table.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def html_page(title: str, sections: Sequence[Section], preamble: Sequence[str],
              anchored: str = "cells") -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts += [f"<p>{html.escape(p)}</p>" for p in preamble]
    parts.append("<ul>" + "".join(f'<li><a href="#{s.anchor}">{html.escape(s.title)}</a></li>' for s in sections) + "</ul>")
    for section in sections:
        parts.append(f'<h2 id="{section.anchor}">{html.escape(section.title)}</h2>')
        if section.intro:
            parts.append(f"<p>{html.escape(section.intro)}</p>")
        parts += [f'<div class="note">{html.escape(n)}</div>' for n in section.notes]
        for figure in section.figures:
            data = base64.b64encode(figure.png).decode()
            parts.append(f'<figure><img alt="{html.escape(figure.caption)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>")
        for table in section.tables:
            parts.append(html_table(table, row_anchor="cell_id" if section.anchor == anchored else None))
    parts.append("</body></html>")
    return "\n".join(parts)
