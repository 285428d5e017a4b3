"""JSON with comments (JSONC, as VS Code writes it), read with where each value sits in the text.

A host's file may hold `//` and `/* */` comments and trailing commas (VS Code's `mcp.json` and
`settings.json`), or be plain JSON (every other host). The text is read as JSON once comments
and trailing commas are blanked out (spaces, newlines kept): offsets, lines and columns stay
those of the file, and the C parser reads a file of megabytes at once. `parse` gives the root
`Value`: its span, what it holds, and, for an object, its members in order, each with the span
of its key, its value and its comma; `value_at` does the same for an object inside. A key
written twice is kept as written (`Value.data` holds the last, as JavaScript's JSON.parse
does); `Value.member` refuses to choose between them.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from emceepee_cli.errors import ConfigError

# Text to keep (strings among it: a `//` in a URL is no comment), then what to blank: a comment; or
# then a comma before a closing bracket. Long runs are matched at once, so a file of megabytes
# takes few matches.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_COMMENT = re.compile(rf"((?:[^\"/]+|{_STRING}|/(?![/*]))*)(//[^\n]*|/\*.*?\*/)?", re.DOTALL)
_TRAILING_COMMA = re.compile(rf"((?:[^\",]+|{_STRING}|,(?!\s*[}}\]]))*)(,)?")
_MAYBE_TRAILING_COMMA = re.compile(r",\s*[}\]]")  # (or inside a string)
_NOT_NEWLINE = re.compile(r"[^\r\n]")
_BLANKS = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


class JsoncError(ConfigError):
    """The text is not JSON (with comments), or cannot be edited safely."""


@dataclass
class Member:
    key: str
    start: int  # where the key's opening quote is
    value: Value
    comma: int | None = None  # where the comma after the value is, if there is one

    @property
    def end(self) -> int:
        return self.value.end if self.comma is None else self.comma + 1


@dataclass
class Value:
    start: int
    end: int
    data: Any
    members: list[Member] | None = None  # an object's, in the order written (parse, value_at)

    def member(self, key: str) -> Member | None:
        """The member named `key`; a key written twice is refused (which one counts is unclear)."""
        found = [m for m in self.members or [] if m.key == key]
        if len(found) > 1:
            raise JsoncError(f'the key "{key}" is written {len(found)} times in the same object')
        return found[0] if found else None


def parse(text: str) -> Value:
    """The value `text` holds, with where its members sit; `JsoncError` if it is not JSON."""
    quiet, plain = _blanked(text)
    start = _BLANKS.match(plain).end()  # type: ignore[union-attr]  # matches ""
    try:
        data, end = _DECODER.raw_decode(plain, start)
    except json.JSONDecodeError as exc:
        raise JsoncError(_reason(exc, plain)) from None
    except RecursionError:
        raise JsoncError("values nested too deeply to read") from None
    if plain[end:].strip():
        raise JsoncError(f"more text after the end of the JSON value at {_where(text, end)}")
    if not isinstance(data, dict):
        return Value(start, end, data)
    return _object(quiet, plain, start)


def value_at(text: str, start: int) -> Value:
    """The object that starts at `start` in `text` (a JSONC text), with where its members sit."""
    quiet, plain = _blanked(text)
    return _object(quiet, plain, start)


def _object(quiet: str, plain: str, start: int) -> Value:
    """The object at `start`: `quiet` is the text with its comments blanked, `plain` with its
    trailing commas blanked too (both already read as JSON)."""
    members: list[Member] = []
    pos = _skip(quiet, start + 1)
    while quiet[pos] != "}":
        key, after = _DECODER.raw_decode(plain, pos)
        value_start = _skip(quiet, _skip(quiet, after) + 1)  # past the ':'
        data, value_end = _DECODER.raw_decode(plain, value_start)
        member = Member(key, pos, Value(value_start, value_end, data))
        members.append(member)
        pos = _skip(quiet, value_end)
        if quiet[pos] == ",":
            member.comma, pos = pos, _skip(quiet, pos + 1)
    data = {member.key: member.value.data for member in members}
    return Value(start, pos + 1, data, members)


def _skip(text: str, pos: int) -> int:
    return _BLANKS.match(text, pos).end()  # type: ignore[union-attr]  # matches ""


@functools.lru_cache(maxsize=4)
def _blanked(text: str) -> tuple[str, str]:
    """`text` with its comments as blanks, and with its trailing commas as blanks too. Plain JSON
    (most hosts' files) is both as it is."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        return text, text

    quiet = _blank(_COMMENT, text.removeprefix("\ufeff").rjust(len(text)))
    if not _MAYBE_TRAILING_COMMA.search(quiet):
        return quiet, quiet
    return quiet, _blank(_TRAILING_COMMA, quiet)


def _blank(pattern: re.Pattern[str], text: str) -> str:
    """`text` with what `pattern`'s second group matches as blanks (newlines kept)."""
    out: list[str] = []
    for match in pattern.finditer(text):
        kept, blanked = match.group(1, 2)
        out.append(kept)
        if blanked:
            out.append(_NOT_NEWLINE.sub(" ", blanked))
        elif match.start() == match.end() < len(text):
            out.append(text[match.start()])  # not JSON here (an open string or comment): kept as it is
    return "".join(out)


def _reason(exc: json.JSONDecodeError, plain: str) -> str:
    if plain.startswith("/*", exc.pos):
        return f"a comment that is never closed (no */) at {_where(plain, exc.pos)}"
    said = exc.msg.removesuffix(" at")  # "Invalid control character at"
    return f"{said[:1].lower()}{said[1:]} at {_where(plain, exc.pos)}"


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"
