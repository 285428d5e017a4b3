"""What a host may put in a request's params, checked once at the wire, before anything runs.

Two things are valid JSON yet nothing downstream can carry, so a request holding one is refused
with `-32602 Invalid params` and its own id, naming the field (`params.arguments.task_id`):

- a string or key with an unpaired UTF-16 surrogate (`"\\ud800"`, which a JavaScript host can
  write): it is not text, and the SDK's parser, the journal and a backend's pipe all refuse it;
- nesting deeper than `MAX_DEPTH` levels of objects and arrays within one another, counting
  `params` as the first: the SDK's parser stops at about 200, and our own walkers recurse.

The wire (server/stdio.py) checks each request the SDK's parser took, and reads with `lenient`
each line it refused, to answer a request that holds one of these with its id rather than with
an anonymous parse error its host could never match to the request. Each entry of a batch is
checked alike, and so are the host's answers to our own requests (server/host_answers.py). The fast lane
(server/fastlane.py) leaves such a request to the wire. On a plain line the check costs a
few byte searches (about 7 µs for a small request, 0.2 ms for a 1 MB one): it walks the params
only when the bytes could hold a surrogate or that many brackets.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100  # levels of objects and arrays in a request's params (params itself is the first)

# An escaped surrogate, or one written raw in UTF-8 (which `json` reads too); a `\\` before it
# makes a false alarm, which costs only a walk.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
# A string (skipped whole, escapes and all) or a bracket: enough to follow nesting in a line.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
PRUNE_TOKENS = 1_000_000  # a line with more brackets than this is not read past json's own limit
_SHOWN_SEGMENTS = 5  # of a deep field's path


def fault(raw: bytes, params: object, root: str = "params") -> str | None:
    """What is wrong with a request's params (or, with `root="result"`, an answer's result), read
    from the line `raw` (a batch's whole line will do), naming the field; None: nothing."""
    if not _may_nest_past(raw) and not _may_hold_surrogate(raw):
        return None
    return _walk(params, root)


# Both prefilters look for single bytes, which `find` and `in` do at memchr speed (~30 µs a MB);
# `bytes.count` and the pattern tried at every position are 40 to 100 times slower.
def _may_nest_past(raw: bytes) -> bool:
    """More than MAX_DEPTH brackets in the line (in strings too: a false alarm costs a walk)."""
    seen = 0
    for mark in (b"[", b"{"):
        at = raw.find(mark)
        while at >= 0:
            seen += 1
            if seen > MAX_DEPTH:
                return True
            at = raw.find(mark, at + 1)
    return False


def _may_hold_surrogate(raw: bytes) -> bool:
    return (b"\\" in raw or b"\xed" in raw) and _SURROGATE.search(raw) is not None


def lenient(raw: bytes) -> Any:
    """The line as `json` reads it (lone surrogates included), with whatever is nested past the
    limit cut down to an empty array, so a line of any depth is read without recursing that deep.
    ValueError: not JSON."""
    try:
        return json.loads(raw)
    except RecursionError:
        pass
    try:
        return json.loads(_pruned(raw))
    except RecursionError as exc:  # brackets that do not balance, left as they were
        raise ValueError("nested past json's limit") from exc


def _walk(params: object, root: str) -> str | None:
    stack: list[tuple[object, tuple[str | int, ...], int]] = [(params, (root,), 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if _unpaired(value):
                return (
                    f"{_name(path)} holds an unpaired UTF-16 surrogate, which is not text; send valid Unicode"
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            levels = f"more than {MAX_DEPTH} levels deep (objects and arrays)"
            return f"{_name(path)} is nested {levels}; send flatter data"
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        for key, item in reversed(items):  # popped in order: the first bad field is named
            if isinstance(key, str) and _unpaired(key):
                return f"a key in {_name(path)} holds an unpaired UTF-16 surrogate; send valid Unicode"
            stack.append((item, (*path, key), depth + 1))
    return None


def _unpaired(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _name(path: tuple[str | int, ...]) -> str:
    shown = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path[:_SHOWN_SEGMENTS])
    return shown[1:] + ("…" if len(path) > _SHOWN_SEGMENTS else "")


def _pruned(raw: bytes) -> bytes:
    """`raw` with each object or array that opens past the limit replaced by `[]` (still too deep,
    so `_walk` names it). A line whose brackets do not balance is returned such that `json`
    refuses it."""
    # params is the second level of a message and the third of a batch's: cut below both, so
    # what is cut is always past MAX_DEPTH, never a batch entry's last allowed level.
    cut_at = MAX_DEPTH + 3
    pieces: list[bytes] = []
    depth, start, kept = 0, -1, 0
    for count, token in enumerate(_TOKEN.finditer(raw)):
        if count > PRUNE_TOKENS:
            raise ValueError(f"more than {PRUNE_TOKENS} brackets nested past json's limit")
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            if depth == cut_at:
                start = token.start()
        elif mark in (b"]", b"}"):
            if depth == cut_at and start >= 0:
                pieces += (raw[kept:start], b"[]")
                kept, start = token.end(), -1
            depth -= 1
    pieces.append(raw[kept:])
    return b"".join(pieces)
