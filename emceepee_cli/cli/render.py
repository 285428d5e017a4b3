"""The only place the CLI writes to the terminal.

Lists render as rich tables, or with `--json` as the same objects the meta-tools return.
Errors go to stderr as the message and the hint, never a traceback (unless --verbose).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from emceepee_cli.errors import EmceepeeError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def as_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
    rows = list(rows)
    if not rows:
        out.print(empty)
        return
    grid = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        grid.add_column(column, no_wrap=i == 0, overflow="fold")  # ids are never cut: people copy them
    for row in rows:
        grid.add_row(*("" if cell is None else str(cell) for cell in row))
    out.print(grid)


def line(message: str = "", style: str | None = None) -> None:
    out.print(message, style=style, markup=False, highlight=False)


def ask(prompt: str) -> str:
    """One line typed at the terminal, after `prompt` (raises EOFError when input ends)."""
    out.print(prompt, end="", markup=False, highlight=False)
    return input()


def warn(message: str) -> None:
    err.print(message, style="yellow", markup=False, highlight=False)


def error(exc: EmceepeeError) -> None:
    err.print(f"Error: {exc.message}", style="bold red", markup=False, highlight=False)
    if exc.hint:
        err.print(exc.hint, markup=False, highlight=False)
