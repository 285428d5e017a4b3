"""The JSON-RPC bytes emceepee writes to the host, in the very bytes the SDK would write.

Both lanes finish a reply here. The slow lane's messages come from the SDK server and are
written as the SDK's own stdio transport writes them (`text`). The fast lane (server/fastlane.py)
writes a tool call's reply without the SDK's models, and the host can tell no difference only
because every byte is the SDK's: a plain result's members in the SDK's order (`canonical`,
taken in calls/raw_step.py), the envelope's text blocks put in at the end of its content
(`with_text_blocks`), the response around it (`reply_parts`), or a result the SDK's way
(`tool_result`, `reply`), and the progress notifications (`progress`). The errors both lanes
answer with (`error`) and the ids both accept (`valid_id`) are defined here once.

tests/test_jsonrpc.py holds each of these to what the SDK itself writes through its stdio server, so
an SDK release that writes other bytes fails there, not at a host.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeGuard

import mcp_types as types
import pydantic_core
from mcp_types import methods

RequestId = int | str

RESPONSE_HEAD = b'{"jsonrpc":"2.0","id":'  # how the SDK starts a response (backends/raw_pipe.py reads it too)
CANONICAL_KEYS = frozenset(("_meta", "content", "isError", "structuredContent"))
CONTENT_END = b'],"isError":'  # after a plain result's content, in `canonical`'s order
META_SCAN_BYTES = 1024 * 1024  # a plain result's `_meta` is looked for this far into its bytes


def valid_id(value: object) -> TypeGuard[RequestId]:
    """A JSON-RPC id MCP allows: a string or an integer (never null, never a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# ---- messages ---------------------------------------------------------------------------


def text(message: types.JSONRPCMessage) -> str:
    """A message as the SDK's stdio transport writes it, without its newline."""
    return message.model_dump_json(by_alias=True, exclude_unset=True)


def error(
    request_id: RequestId | None, message: str, code: int = types.INVALID_REQUEST
) -> types.JSONRPCError:
    """The error answering `request_id` (None: a request whose id could not be read)."""
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def progress(token: RequestId, done: float, total: float | None = None, message: str | None = None) -> bytes:
    """A `notifications/progress` line, as the SDK's dispatcher writes one for `report_progress`."""
    params: dict[str, Any] = {"progressToken": token, "progress": done}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)
    return text(note).encode()


def tool_result(result: types.CallToolResult, protocol: str) -> dict[str, Any]:
    """A tools/call result in its wire form for the negotiated `protocol`, as the SDK server's
    runner makes it of a handler's result."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return methods.serialize_server_result("tools/call", protocol, dumped)


def reply(request_id: RequestId, result: dict[str, Any]) -> bytes:
    """The response carrying a wire-form `result`, serialized by the SDK's models."""
    return text(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)).encode()


def reply_parts(request_id: RequestId, body: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
    """The response around a result already in the SDK's bytes (`body`, in pieces, never copied)."""
    yield RESPONSE_HEAD + pydantic_core.to_json(request_id) + b',"result":'
    yield from body
    yield b"}"


# ---- plain results ----------------------------------------------------------------------


def canonical(result: dict[str, Any], body: bytes | None) -> bytes | None:
    """The bytes the SDK server writes for a result of the plain shape (text blocks, `isError`,
    object `structuredContent` and `_meta`): its members in the SDK's order, serialized as it
    serializes. The backend's own bytes `body` when they already are exactly that (an SDK
    backend's); None for any other shape."""
    if not result.keys() <= CANONICAL_KEYS:
        return None
    content, is_error = result.get("content"), result.get("isError", False)
    if not isinstance(content, list) or not isinstance(is_error, bool):
        return None
    if not all(isinstance(result.get(key, {}), dict) for key in ("structuredContent", "_meta")):
        return None
    blocks = []
    for block in content:
        if not (isinstance(block, dict) and block.keys() == {"type", "text"} and block["type"] == "text"):
            return None
        if not isinstance(block["text"], str):
            return None
        blocks.append({"text": block["text"], "type": "text"})
    if not all(_finite(result.get(key)) for key in ("structuredContent", "_meta")):
        return None  # NaN, Infinity or 1e400: json reads them; the slow path's parser decides
    shaped: dict[str, Any] = {"_meta": result["_meta"]} if "_meta" in result else {}
    shaped["content"], shaped["isError"] = blocks, is_error  # the SDK always writes isError
    if "structuredContent" in result:
        shaped["structuredContent"] = result["structuredContent"]
    try:
        out = pydantic_core.to_json(shaped)
    except (ValueError, UnicodeError):  # e.g. a lone surrogate: the model path decides as the slow path does
        return None
    return body if body is not None and out == body else out


def _finite(value: Any) -> bool:
    """No float in `value` is NaN or infinite (the only members of a plain result that hold
    numbers are `structuredContent` and `_meta`, so a big text block is never scanned)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def with_text_blocks(
    chunks: Callable[[], Iterable[bytes]], texts: Sequence[str]
) -> Iterable[bytes | memoryview] | None:
    """A plain result's bytes (`chunks()` yields them from the start, each time it is called) with
    a text block for each of `texts` put in at the end of its content, exactly as the SDK writes
    that result with those blocks; None when the bytes are not of the shape that allows it."""
    if not texts:
        return chunks()
    found = _content_end(chunks())
    if found is None:
        return None
    end, empty = found
    blocks = [pydantic_core.to_json({"text": block, "type": "text"}) for block in texts]
    added = (b"" if empty else b",") + b",".join(blocks)
    return _inserted(chunks(), end, added)


def _inserted(chunks: Iterable[bytes], at: int, added: bytes) -> Iterator[bytes | memoryview]:
    """`chunks` with `added` put in at offset `at` (the pieces around it are views, not copies)."""
    offset = 0
    for piece in chunks:
        if offset <= at < offset + len(piece):
            view = memoryview(piece)
            yield view[: at - offset]
            yield added
            yield view[at - offset :]
        else:
            yield piece
        offset += len(piece)


def _content_end(chunks: Iterable[bytes]) -> tuple[int, bool] | None:
    """Where the content array of a plain result's bytes closes (the offset of its `]`), and
    whether it is empty. Its blocks are `{"text":…,"type":"text"}` objects, whose strings hold
    no bare quote, so the first `],"isError":` after the array opens is its end."""
    pieces = iter(chunks)
    first = next(pieces, b"")
    start = _content_start(first)
    if start is None:
        return None
    offset, tail = 0, b""
    for piece in itertools.chain((first,), pieces):
        window = tail + piece
        found = window.find(CONTENT_END, max(0, start - (offset - len(tail))))
        if found >= 0:
            end = offset - len(tail) + found
            return end, end == start + 1
        tail = window[-(len(CONTENT_END) - 1) :]
        offset += len(piece)
    return None


def _content_start(first: bytes) -> int | None:
    """The offset of the `[` that opens the content array, from the bytes' first piece."""
    if first.startswith(b'{"content":['):
        return len(b'{"content":')
    if not first.startswith(b'{"_meta":{'):
        return None
    scanned = first[:META_SCAN_BYTES].decode(errors="replace")  # its _meta, whole in there, or None
    try:
        _, meta_end = json.JSONDecoder().raw_decode(scanned, len('{"_meta":'))
    except ValueError:
        return None
    at = len(scanned[:meta_end].encode(errors="replace"))
    return at + len(b',"content":') if first.startswith(b',"content":[', at) else None
