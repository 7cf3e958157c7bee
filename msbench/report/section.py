"""The report's content as plain data: sections of tables and figures, rendered by `render`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Table:
    """A table with a caption. `links` names the columns that hold cell ids (comma-separated allowed)."""

    caption: str
    frame: pd.DataFrame
    links: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A PNG plot, embedded in the HTML as base64."""

    caption: str
    png: bytes


@dataclass(frozen=True)
class Section:
    """One numbered part of the report. `notes` say what is missing or how to read the numbers."""

    title: str
    intro: str = ""
    notes: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = field(default=())
    anchor: str = ""
