"""Reading untrusted byte streams as bounded lines, and the id at the head of an over-long message."""

from __future__ import annotations

import json

from emceepee_cli.core.lines import Lines, Piece, top_level


def test_lines_split_across_chunks_and_an_over_long_line_yields_only_its_head() -> None:
    lines = Lines(limit=8, head=4)
    pieces = [*lines.feed(b"ab\ncd"), *lines.feed(b"ef\n0123456789"), *lines.feed(b"xyz" * 1000 + b"\nlast")]
    pieces += list(lines.end())
    assert pieces == [
        (Piece.LINE, b"ab"),
        (Piece.LINE, b"cdef"),
        (Piece.HEAD, b"0123"),  # once, at the moment it passed the limit; the rest was skipped, not kept
        (Piece.LINE, b"last"),
    ]


def test_a_line_that_never_ends_costs_at_most_the_limit() -> None:
    lines = Lines(limit=1024)
    heads = [p for _ in range(1000) for p in lines.feed(b"x" * 65536)]
    assert heads == [(Piece.HEAD, b"x" * 1024)]
    assert list(lines.end()) == []


def test_the_id_is_read_from_the_head_of_a_message_cut_anywhere_after_it() -> None:
    message = json.dumps({"jsonrpc": "2.0", "id": 42, "result": {"content": [{"text": "y" * 1000}]}})
    for cut in (30, 100, len(message) - 1):
        assert top_level(message[:cut].encode()) == {"jsonrpc": "2.0", "id": 42}
    request = b'{"method": "sampling/createMessage", "params": {"id": 7, "x": "}{"}, "id": "r-1", "more'
    assert top_level(request) == {"method": "sampling/createMessage", "id": "r-1"}


def test_a_value_cut_at_the_end_of_the_head_is_not_trusted() -> None:
    assert top_level(b'{"jsonrpc": "2.0", "id": 12') == {"jsonrpc": "2.0"}  # it may be 123…
    assert top_level(b'{"result": {"a": [1, 2') == {}
    assert top_level(b"not json at all") == {}
