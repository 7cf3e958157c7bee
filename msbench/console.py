"""Tables on the terminal: the one way every command prints rows (rich, at full width off a terminal)."""

from __future__ import annotations

import sys
from typing import Sequence


def print_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    # Off a terminal rich would squeeze columns to 80 characters; keep ids and labels whole.
    Console(width=None if sys.stdout.isatty() else 240).print(table)
