"""Reading untrusted byte streams as bounded lines, and the id at the head of an over-long message."""

from __future__ import annotations

import json
import tracemalloc

from emceepee_cli.backends.lines import MAX_PARTS, Lines, Piece, top_level


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


def test_a_line_trickling_in_tiny_chunks_costs_about_its_own_size() -> None:
    lines = Lines(limit=64 * 1024 * 1024)
    tracemalloc.start()
    try:
        for _ in range(200_000):  # 400 KB, two bytes at a time: a backend writing as slowly as it can
            assert list(lines.feed(b"ab")) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024  # one object per chunk would be ~9 MB; its buffer is ~0.4 MB
    assert list(lines.feed(b"!\n")) == [(Piece.LINE, b"ab" * 200_000 + b"!")]


def test_a_line_is_the_same_bytes_in_however_many_chunks_it_came() -> None:
    line = bytes(range(256)).replace(b"\n", b"") * 40
    for size in (1, 7, 100, len(line)):
        lines = Lines(limit=len(line) + 1)
        chunks = [line[i : i + size] for i in range(0, len(line), size)] + [b"\nnext"]
        pieces = [p for chunk in chunks for p in lines.feed(chunk)] + list(lines.end())
        assert pieces == [(Piece.LINE, line), (Piece.LINE, b"next")], size


def test_the_head_of_a_line_that_came_in_many_chunks_is_its_first_bytes() -> None:
    lines = Lines(limit=MAX_PARTS + 100, head=10)
    pieces = [p for i in range(MAX_PARTS + 28) for p in lines.feed(b"%d" % (i % 10))]  # past the list
    pieces += [*lines.feed(b"y" * 100 + b"\nok\n")]
    assert pieces == [(Piece.HEAD, b"0123456789"), (Piece.LINE, b"ok")]
