"""Laying out a table as lines of text, for a given width (None: no limit, nothing cut or wrapped).

Columns are separated by two spaces. When the natural widths do not fit, the wide columns wrap
(at word boundaries) while the first column and the short ones keep their width; when even that
cannot give each wrapping column a readable width, every row becomes a block of `label: value`
lines instead, which reads well at any width. A newline inside a cell is shown as `⏎`, so each
row stays one line in a pipe.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

GAP = "  "
MIN_WRAP = 12  # narrower than this, a wrapped column is one word per line: show records instead
SHORT = 12  # a column no wider than this never wraps (statuses, counts, booleans)


@dataclass(frozen=True)
class Shown:
    lines: list[str]
    records: bool  # laid out as label: value blocks (no header line)


def _flat(cell: str) -> str:
    return cell.replace("\r\n", "⏎").replace("\n", "⏎").replace("\t", " ")


def table(columns: list[str], rows: list[list[str]], width: int | None) -> Shown:
    rows = [[_flat(cell) for cell in row] for row in rows]
    natural = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    total = sum(natural) + len(GAP) * (len(columns) - 1)
    if width is None or total <= width:
        return Shown([_join(cells, natural) for cells in [columns, *rows]], records=False)
    widths = _fit(natural, width)
    if widths is None or _breaks_words(rows, widths):
        return Shown(_records(columns, rows, width), records=True)
    out = [_join(columns, widths)]
    for row in rows:
        out += _wrapped_row(row, widths)
    return Shown(out, records=False)


def record(pairs: list[tuple[str, str]], width: int | None) -> list[str]:
    """One object as aligned `label: value` lines, the value wrapped under itself."""
    label_width = max((len(k) for k, _ in pairs), default=0)
    indent = label_width + 2
    out = []
    for key, value in pairs:
        value = _flat(value)
        room = None if width is None else max(MIN_WRAP, width - indent)
        parts = _wrap(value, room) if room else [value]
        out.append(f"{key + ':':<{indent}}{parts[0]}".rstrip())
        out += [" " * indent + part for part in parts[1:]]
    return out


def _fit(natural: list[int], width: int) -> list[int] | None:
    """Widths that fit `width`, shrinking only the wide columns after the first; None if none do."""
    fixed = [i == 0 or w <= SHORT for i, w in enumerate(natural)]
    room = width - len(GAP) * (len(natural) - 1) - sum(w for w, f in zip(natural, fixed, strict=True) if f)
    flexible = [w for w, f in zip(natural, fixed, strict=True) if not f]
    if not flexible or room < MIN_WRAP * len(flexible):
        return None
    # Share the room in proportion to each column's natural width, never below MIN_WRAP.
    shares = [max(MIN_WRAP, room * w // sum(flexible)) for w in flexible]
    while sum(shares) > room:
        widest = shares.index(max(shares))
        shares[widest] -= 1
    it = iter(shares)
    return [w if f else next(it) for w, f in zip(natural, fixed, strict=True)]


def _breaks_words(rows: list[list[str]], widths: list[int]) -> bool:
    """Wrapping at `widths` would cut a word (a path, a URL): label: value lines read better."""
    return any(
        len(word) > w for row in rows for cell, w in zip(row, widths, strict=True) for word in cell.split()
    )


def _wrap(text: str, width: int | None) -> list[str]:
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def _wrapped_row(row: list[str], widths: list[int]) -> list[str]:
    parts = [_wrap(cell, w) for cell, w in zip(row, widths, strict=True)]
    height = max(len(p) for p in parts)
    return [_join([p[i] if i < len(p) else "" for p in parts], widths) for i in range(height)]


def _join(cells: list[str], widths: list[int]) -> str:
    padded = [cell.ljust(w) for cell, w in zip(cells[:-1], widths, strict=False)] + cells[-1:]
    return GAP.join(padded).rstrip()


def _records(columns: list[str], rows: list[list[str]], width: int) -> list[str]:
    out: list[str] = []
    for i, row in enumerate(rows):
        if i:
            out.append("")
        out += record(
            [(c, v) for c, v in zip(columns, row, strict=True) if v], width
        )  # an empty cell: no line
    return out
