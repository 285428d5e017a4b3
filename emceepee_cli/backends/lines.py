"""Reading a backend's byte streams as lines, with a bound on what one line may cost.

A backend's stdout and stderr are untrusted: a "line" may never end. `Lines` keeps at most
`limit` bytes of the line in progress; past that it hands out the line's head once and skips the
rest up to the next newline without keeping it. Each chunk is searched only for its own
newlines, so reading stays linear however long a line is.

`top_level` reads the top-level members of a JSON-RPC message from the head of such a line,
so the request whose answer was too long can still be answered with an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import Enum
from typing import Any


class Piece(Enum):
    LINE = "line"  # a whole line (without its newline), within the limit
    HEAD = "head"  # the start of a line over the limit; the rest of it is skipped


# A line in more chunks than this is gathered in one buffer: a list of many tiny chunks costs ~40
# bytes of bookkeeping each, so a backend trickling a line could run memory up. A big result read
# 64 KiB at a time stays in the list up to 64 MiB, and is copied once.
MAX_PARTS = 1024


class Lines:
    def __init__(self, limit: int, head: int | None = None) -> None:
        self.limit = limit
        self.head = min(head or limit, limit)
        self._parts: list[bytes] = []  # the line in progress, joined once when it ends
        self._buffer: bytearray | None = None  # or, once it came in many chunks, gathered here
        self._size = 0
        self._skipping = False

    def __repr__(self) -> str:
        return f"<Lines limit={self.limit} buffered={self._size} skipping={self._skipping}>"

    def feed(self, chunk: bytes) -> Iterator[tuple[Piece, bytes]]:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._skipping:
                if self._size + len(piece) > self.limit:
                    yield Piece.HEAD, self._head(piece)
                    self._skipping = True
                elif piece:
                    self._keep(piece)
            if end < 0:
                return
            if self._skipping:
                self._skipping = False
            else:
                yield Piece.LINE, self._take()
            start = end + 1

    def end(self) -> Iterator[tuple[Piece, bytes]]:
        """At end of stream: the last line, if it had no newline."""
        if self._size and not self._skipping:
            yield Piece.LINE, self._take()
        self._reset()

    def _keep(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._buffer is not None:
            self._buffer += piece
        elif len(self._parts) < MAX_PARTS:
            self._parts.append(piece)
        else:
            self._buffer = bytearray().join(self._parts)
            self._buffer += piece
            self._parts = []

    def _head(self, piece: bytes) -> bytes:
        """The first `head` bytes of a line over the limit, whose kept parts are then dropped."""
        head = bytearray()
        kept = self._parts if self._buffer is None else [self._buffer]
        for part in (*kept, piece):
            head += part[: self.head - len(head)]
        self._reset()
        return bytes(head)

    def _take(self) -> bytes:
        """The line in progress, whole: copied once (a line that came in one chunk not at all)."""
        parts, buffer = self._parts, self._buffer
        self._reset()
        if buffer is not None:
            return bytes(buffer)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _reset(self) -> None:
        self._parts, self._buffer, self._size = [], None, 0


_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def top_level(head: bytes) -> dict[str, Any]:
    """The top-level scalar members (`id`, `method`…) that can be read whole in `head`."""
    text = head.decode("utf-8", errors="replace")
    found: dict[str, Any] = {}
    try:
        i = _skip_space(text, 0)
        if text[i] != "{":
            return found
        i += 1
        while True:
            i = _skip_space(text, i)
            if text[i] != '"':
                return found
            key, i = _DECODER.raw_decode(text, i)
            i = _skip_space(text, i)
            if text[i] != ":":
                return found
            i = _skip_space(text, i + 1)
            if text[i] in "{[":
                i = _skip_nested(text, i)
            else:
                value, i = _DECODER.raw_decode(text, i)
                if i >= len(text):
                    return found  # the value may have been cut at the end of the head
                found[key] = value
            i = _skip_space(text, i)
            if text[i] != ",":
                return found
            i += 1
    except (IndexError, ValueError):
        return found


def _skip_space(text: str, i: int) -> int:
    while text[i] in _SPACE:
        i += 1
    return i


def _skip_nested(text: str, i: int) -> int:
    """The index after the object or array starting at `i` (IndexError if it is cut off)."""
    depth, in_string = 0, False
    while True:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
