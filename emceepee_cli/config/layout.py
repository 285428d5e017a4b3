"""Where each table of a TOML file sits in its text, so one table can be edited and the rest kept.

The text is cut into logical lines (a multi-line string or array is one line, however many
newlines it holds), each one blank, a comment, a table header or something else (a key and its
value). A table's block runs from its header to its last key (and the comment lines right under
it, unless they run into the next header), so the comments that precede the next header stay
with that header. Only a file tomllib has already read is
scanned: nothing here reports TOML errors.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Literal

# Multi-line strings first (a `"""` is not an empty string and a quote); a string may end in up to
# two extra quotes (`"""a""""` is `a"`). Everything else that matters is one character.
_TOKEN = re.compile(
    r'(?P<string>"""(?:[^"\\]|\\.|"(?!""))*"""(?:"{1,2}(?!"))?'
    r"|'''(?:[^']|'(?!''))*'''(?:'{1,2}(?!'))?"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*')"
    r"|(?P<comment>#[^\n]*)"
    r"|(?P<open>[\[{])|(?P<close>[\]}])"
    r"|(?P<newline>\n)"
    r"|(?P<space>[ \t\r]+)"
    r"|(?P<other>[^\"'#\[\]{}\s][^\"'#\[\]{}\n]*|.)",
    re.DOTALL,
)

# The usual header, bare keys only: read without tomllib, since a big file has thousands.
_BARE_HEADER = re.compile(
    r"\[\[?([A-Za-z0-9_-]+(?:[ \t]*\.[ \t]*[A-Za-z0-9_-]+)*)[ \t]*\]\]?[ \t]*(?:#[^\n]*)?\r?\n?"
)
Kind = Literal["blank", "comment", "header", "key"]


@dataclass(frozen=True)
class Line:
    """One logical line: `text[start:end]`, its newline included."""

    start: int
    end: int
    kind: Kind
    table: tuple[str, ...] | None = None  # a header's table path ([a."b c"] → ("a", "b c"))


def lines(text: str) -> list[Line]:
    """The logical lines of `text`, a file tomllib can read."""
    out: list[Line] = []
    start, kind, depth, pos = 0, "blank", 0, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        assert match is not None  # the last alternative takes any character
        group, pos = match.lastgroup, match.end()
        if group == "newline":
            out.append(Line(start, pos, kind))  # type: ignore[arg-type]  # kind is always a Kind
            start, kind = pos, "blank" if depth == 0 else "key"
        elif group == "comment":
            kind = "comment" if kind == "blank" else kind
        elif group == "open" and kind == "blank" and depth == 0:
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end + 1
            out.append(Line(start, end, "header", header_table(text[match.start() : end])))
            start, kind, pos = end, "blank", end
        elif group != "space":
            depth += 1 if group == "open" else -1 if group == "close" else 0
            kind = "key"
    if start < len(text):
        out.append(Line(start, len(text), kind))  # type: ignore[arg-type]
    return out


def header_table(header: str) -> tuple[str, ...] | None:
    """The table a header line names (`[servers.git]  # x` → ("servers", "git")), None if unsure."""
    if bare := _BARE_HEADER.fullmatch(header):
        return tuple(part.strip() for part in bare.group(1).split("."))
    try:
        node: object = tomllib.loads(header)
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while True:
        if isinstance(node, list) and len(node) == 1:
            node = node[0]  # an array-of-tables header: [[a.b]]
        if not isinstance(node, dict) or len(node) != 1:
            return tuple(path) if node == {} and path else None
        key, node = next(iter(node.items()))
        path.append(key)


@dataclass(frozen=True)
class Block:
    """Consecutive tables under one prefix ([servers.git] and [servers.git.env]): where their text
    starts (at the first header) and ends (after the last key), and the comment lines right above."""

    start: int
    end: int
    keys_end: int  # after its last key: the comment lines under it are not in start..keys_end
    comments_start: int  # where the comment lines right above the first header begin (else start)


def table_block(found: list[Line], prefix: tuple[str, ...]) -> Block | None:
    """The block of the tables under `prefix`, or None if there is none or it is split in pieces."""
    heads = [i for i, line in enumerate(found) if line.kind == "header"]
    mine = [i for i in heads if _under(found[i].table, prefix)]
    if not mine or found[mine[0]].table != prefix:
        return None
    after = [i for i in heads if i > mine[0] and not _under(found[i].table, prefix)]
    if after and after[0] < mine[-1]:
        return None  # another table in between: not one block
    stop = after[0] if after else len(found)
    last, keys = _last_line(found, mine[-1], stop), _last_key(found, mine[-1], stop)
    first = mine[0]
    above = first
    while above > 0 and found[above - 1].kind == "comment":
        above -= 1
    return Block(found[first].start, found[last].end, found[keys].end, found[above].start)


def last_block_end(found: list[Line], prefix: tuple[str, ...]) -> int | None:
    """Where the text of the last table under `prefix` ends (after its last key), if there is one."""
    heads = [i for i, line in enumerate(found) if line.kind == "header"]
    mine = [i for i in heads if _under(found[i].table, prefix)]
    if not mine:
        return None
    following = [i for i in heads if i > mine[-1]]
    return found[_last_line(found, mine[-1], following[0] if following else len(found))].end


def _last_key(found: list[Line], head: int, stop: int) -> int:
    """The line of the last key of the table whose header is `found[head]` (the header itself if it
    has none), before line `stop`."""
    last = head
    for i in range(head + 1, stop):
        if found[i].kind == "key":
            last = i
    return last


def _last_line(found: list[Line], head: int, stop: int) -> int:
    """The last line of that table: its last key, and the comment lines right under it unless they
    run into the next header (then they are about that one)."""
    below = _last_key(found, head, stop) + 1
    while below < stop and found[below].kind == "comment":
        below += 1
    return below - 1 if below == len(found) or found[below].kind == "blank" else _last_key(found, head, stop)


def _under(table: tuple[str, ...] | None, prefix: tuple[str, ...]) -> bool:
    return table is not None and table[: len(prefix)] == prefix
