"""A host's JSONC file edited in place: the change from one data tree to another becomes edits of
the members that changed, and every other byte of the file stays as it was.

A changed value is rewritten where it is (an object that is in both is edited member by member,
so the comments inside it stay); a removed member goes with its comma, its line if it had the
line to itself, and the comment lines right above it; an added one goes after the last member,
with that member's indentation. Plain JSON stays plain: a trailing comma is written only where
the object already ended with one. New text takes the file's line ending and indentation (tabs,
or its number of spaces); an object written on one line stays on one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from emceepee_cli.hosts.jsonc import JsoncError, Member, Value, parse, value_at


@dataclass(frozen=True)
class Style:
    """How the file writes what is added to it."""

    newline: str
    unit: str  # one level of indentation: a tab, or some spaces

    @classmethod
    def of(cls, text: str) -> Style:
        newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
        indents = re.findall(r"\n([ \t]+)\S", text[:100_000])
        if not indents:
            return cls(newline, "  ")
        if indents[0].startswith("\t"):
            return cls(newline, "\t")
        spaces = [len(indent) for indent in indents if indent.strip(" ") == ""]
        return cls(newline, " " * min(spaces) if spaces else "  ")


def render(value: Any, style: Style, indent: str = "", inline: bool = False) -> str:
    """`value` as JSON text whose lines after the first start with `indent`: objects one member a
    line (or on one line, `inline`), arrays of plain values on one line."""
    if isinstance(value, dict) and value:
        if inline:
            pairs = (f"{_key(k)}: {render(v, style, inline=True)}" for k, v in value.items())
            return "{" + ", ".join(pairs) + "}"
        inner = indent + style.unit
        rows = [f"{inner}{_key(k)}: {render(v, style, inner)}" for k, v in value.items()]
        return "{" + style.newline + ("," + style.newline).join(rows) + style.newline + indent + "}"
    if isinstance(value, list) and value:
        if inline or all(not isinstance(item, (dict, list)) for item in value):
            return "[" + ", ".join(render(item, style, inline=True) for item in value) + "]"
        inner = indent + style.unit
        rows = [inner + render(item, style, inner) for item in value]
        return "[" + style.newline + ("," + style.newline).join(rows) + style.newline + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def edited(text: str, new: dict[str, Any]) -> str:
    """`text` (an object) changed to hold `new`: only the members that differ are rewritten."""
    root = parse(text)
    if root.members is None:
        raise JsoncError("the file does not hold a JSON object")
    out = _object_edited(text, root.start, new, Style.of(text))
    if parse(out).data != new:  # never write what was not meant; a bug here is refused, not saved
        raise JsoncError("emceepee could not make this change without touching other parts of the file")
    return out


def _object_edited(text: str, start: int, new: dict[str, Any], style: Style) -> str:
    """`text` with the object at `start` changed to hold `new`."""
    node = value_at(text, start)
    old = node.data
    for member in reversed(node.members or []):  # from the last: the offsets before it stay true
        if member.key not in new or new[member.key] == old[member.key]:
            continue
        node.member(member.key)  # refuses a key written twice
        if new[member.key] and isinstance(new[member.key], dict) and isinstance(old[member.key], dict):
            text = _object_edited(text, member.value.start, new[member.key], style)
        else:
            inline = "\n" not in text[node.start : node.end]
            value = render(new[member.key], style, _indent(text, member.start), inline)
            text = text[: member.value.start] + value + text[member.value.end :]
    for key in [key for key in old if key not in new]:
        node = value_at(text, start)
        text = _without(text, node, node.member(key))  # type: ignore[arg-type]  # the key is there
    added = {key: value for key, value in new.items() if key not in old}
    return _with(text, value_at(text, start), added, style) if added else text


def _without(text: str, node: Value, member: Member) -> str:
    """`text` without `member` of the object `node`: its line too if it has it to itself, with the
    comment lines right above it, and the comma before it if it was the last."""
    members = node.members or []
    start, end = member.start, member.end
    line_start = text.rfind("\n", 0, start) + 1
    line_end = _line_end(text, end)
    if not text[line_start:start].strip() and line_end is not None:
        start, end = _comments_above(text, line_start), _after_newline(text, line_end)
    else:
        while start > 0 and text[start - 1] in " \t":
            start -= 1
    edits = [(start, end, "")]
    previous = members[members.index(member) - 1] if members.index(member) > 0 else None
    if member is members[-1] and member.comma is None and previous is not None and previous.comma is not None:
        edits.append((previous.comma, previous.comma + 1, ""))
    return _apply(text, edits)


def _with(text: str, node: Value, added: dict[str, Any], style: Style) -> str:
    """`text` with `added` put at the end of the object `node`."""
    members = node.members or []
    if "\n" not in text[node.start : node.end] and members:
        pairs = ", ".join(f"{_key(k)}: {render(v, style, inline=True)}" for k, v in added.items())
        last = members[-1]
        return _apply(text, [(last.end, last.end, f" {pairs}," if last.comma is not None else f", {pairs}")])
    if not members:
        outer = _indent(text, node.start)
        inner = outer + style.unit
        rows = style.newline + _rows(added, style, inner)
        interior = text[node.start + 1 : node.end - 1]
        if not interior.strip():
            return _apply(text, [(node.start + 1, node.end - 1, rows + style.newline + outer)])
        return _apply(text, [(node.start + 1, node.start + 1, rows)])
    last = members[-1]
    line_start = text.rfind("\n", 0, last.start) + 1
    starts_line = not text[line_start : last.start].strip()
    indent = _indent(text, last.start) if starts_line else _indent(text, node.start) + style.unit
    rows = style.newline + _rows(added, style, indent)
    line_end = _line_end(text, last.end)
    at = last.end if line_end is None else line_end
    if last.comma is not None:
        return _apply(text, [(at, at, rows + ",")])
    return _apply(text, [(last.value.end, last.value.end, ","), (at, at, rows)])


def _rows(added: dict[str, Any], style: Style, indent: str) -> str:
    rows = [f"{indent}{_key(k)}: {render(v, style, indent)}" for k, v in added.items()]
    return ("," + style.newline).join(rows)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, new) edit made; edits do not overlap, and of two insertions at
    the same place the one listed first comes first in the text."""
    ordered = sorted(enumerate(edits), key=lambda e: (e[1][0], e[1][1], e[0]), reverse=True)
    for _, (start, end, new) in ordered:
        text = text[:start] + new + text[end:]
    return text


_REST_OF_LINE = re.compile(r"[ \t]*(?://[^\r\n]*|/\*[^\n]*?\*/[ \t]*)*(?=\r?\n|\Z)")


def _line_end(text: str, pos: int) -> int | None:
    """Where the line that `pos` is on ends (before its newline), if only blanks and comments
    follow `pos` on it; else None."""
    match = _REST_OF_LINE.match(text, pos)
    return None if match is None else match.end()


def _after_newline(text: str, pos: int) -> int:
    if text.startswith("\r\n", pos):
        return pos + 2
    return pos + 1 if text.startswith("\n", pos) else pos


_COMMENT_LINE = re.compile(r"[ \t]*(?://[^\n]*|/\*[^\n]*\*/[ \t]*)\r?\n\Z")


def _comments_above(text: str, line_start: int) -> int:
    """Where the comment lines right above the line at `line_start` begin (no blank line between)."""
    while line_start > 0:
        above = text.rfind("\n", 0, line_start - 1) + 1
        if not _COMMENT_LINE.match(text[above:line_start]):
            break
        line_start = above
    return line_start


def _indent(text: str, pos: int) -> str:
    """The blanks that start the line `pos` is on."""
    line_start = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[line_start:pos]).group()  # type: ignore[union-attr]  # matches ""
