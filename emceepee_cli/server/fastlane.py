"""The fast lane: plain tool calls answered beside the SDK server, without its models.

The host wire (server/stdio.py) offers every line holding a `tools/call` to `FastLane.take`
before parsing it. The lane takes a line only when it is plain: a handshake-era host already
known (it made a tool call the slow way, so it is noted), one `tools/call` request of
`execute_tool`, `get_task_result` or a backend tool listed directly (`server__tool`), with
`_meta` no more than a `progressToken`. On any doubt the line goes the slow way, to the answer it
always got.

A taken line runs through the very code the slow path runs (`app.dispatch`: the meta-tool's
checks, `execute_tool`, its chain, policy, approvals, promotion, questions, progress,
cancellation, TTL and journaling); the call is only marked `fast`, so its backend may be called
raw (calls/raw_step.py). What comes back is written as the SDK server would write it: the
backend's result bytes with the host's id when they came raw (or were read back from the
journal, a task's), the envelope's text blocks put in at the end of their content, else the same
result (with its envelope blocks) serialized as the SDK does. A host's
`notifications/cancelled` cancels it as the SDK cancels a handler: no answer is written.

`EMCEEPEE_FAST_LANE=0` in serve's environment turns the lane off.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli.backends.raw_pipe import loads
from emceepee_cli.calls import spool
from emceepee_cli.calls.call import Passed, Relay
from emceepee_cli.server import host_input
from emceepee_cli.server.envelope import as_json, envelope_blocks, with_envelope
from emceepee_cli.server.meta_tools import TOOLS, Call
from emceepee_cli.server.resume_wire import with_next_token
from emceepee_cli.server.stdio import HostWire, RequestId
from emceepee_cli.session.wiring import Services

log = logging.getLogger(__name__)

FAST_TOOLS = ("execute_tool", "get_task_result")  # meta-tools whose answer may be a backend's bytes

Dispatch = Callable[
    [Services, str, dict[str, Any] | None, Call], Awaitable[tuple[types.CallToolResult | Passed, bool]]
]


class FastLane:
    def __init__(self, dispatch: Dispatch, enabled: bool | None = None) -> None:
        self.dispatch = dispatch  # server/app.py's, which the slow path runs too
        self.enabled = os.environ.get("EMCEEPEE_FAST_LANE", "1") != "0" if enabled is None else enabled
        self.services: Services | None = None
        self._running: dict[RequestId, anyio.CancelScope] = {}

    def __repr__(self) -> str:
        return f"<FastLane enabled={self.enabled} running={len(self._running)}>"

    def attach(self, services: Services | None) -> None:
        """serve's parts, while they run (None once they stop)."""
        self.services = services

    def take(self, raw: bytes, wire: HostWire) -> bool:
        """Answer this line on the fast lane (True), or leave it to the slow way (False)."""
        try:
            return self._take(raw, wire)
        except Exception:  # the wire must go on whatever the lane trips on: the slow way answers
            log.exception("the fast lane failed on a line; it goes the slow way")
            return False

    def _take(self, raw: bytes, wire: HostWire) -> bool:
        services = self.services
        if not self.enabled or services is None or not services.host.named:
            return False
        if wire.protocol is None or wire.protocol in MODERN_PROTOCOL_VERSIONS:
            return False
        try:
            doc = loads(raw)
        except (ValueError, RecursionError):  # the slow way names what is wrong with it
            return False
        plan = _plan(services, doc)
        if plan is None or plan[0] in self._running or host_input.fault(raw, doc["params"]) is not None:
            return False  # the wire refuses a request with a fault in its params, naming the field
        request_id = plan[0]
        scope = self._running[request_id] = anyio.CancelScope()
        services.runtime.spawn(self._serve, services, plan, wire, scope, name=f"fast {request_id!r}")
        return True

    def cancelled(self, request_id: RequestId) -> None:
        """The host cancelled a request; if it is ours, stop it as the SDK stops a handler."""
        scope = self._running.get(request_id)
        if scope is not None:
            scope.cancel()

    async def _serve(self, services: Services, plan: _Plan, wire: HostWire, scope: anyio.CancelScope) -> None:
        request_id = plan[0]
        passed: list[Passed] = []  # a backend's bytes: released once written, whatever happens
        try:
            with scope:
                await self._answer(services, plan, wire, passed)
        finally:
            self._running.pop(request_id, None)
            for result in passed:
                result.body.release()
                spool.give_back(result.body.size)

    async def _answer(self, services: Services, plan: _Plan, wire: HostWire, passed: list[Passed]) -> None:
        request_id, name, arguments, progress_token = plan
        relay = None
        if progress_token is not None:
            relay = Relay(_progress_sender(wire, progress_token))
        try:
            result, own = await self.dispatch(services, name, arguments, Call(relay=relay, fast=True))
            if isinstance(result, Passed):
                passed.append(result)
            parts = _reply(services, wire, request_id, result, own)
        except Exception:  # the host must get an answer whatever went wrong here
            log.exception("the fast lane failed to answer request %r", request_id)
            await wire.send_error(request_id, types.INTERNAL_ERROR, "emceepee failed inside tools/call")
            return
        await wire.send_parts(parts)


_Plan = tuple[RequestId, str, dict[str, Any] | None, str | int | None]


def _plan(services: Services, doc: Any) -> _Plan | None:
    """What a line asks, if the fast lane may take it; None sends it the slow way."""
    if not isinstance(doc, dict) or doc.keys() != {"jsonrpc", "id", "method", "params"}:
        return None
    request_id, params = doc["id"], doc["params"]
    if doc["jsonrpc"] != "2.0" or doc["method"] != "tools/call" or not _valid_id(request_id):
        return None
    if not isinstance(params, dict) or not params.keys() <= {"name", "arguments", "_meta"}:
        return None
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta", {})
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    if not isinstance(meta, dict) or not meta.keys() <= {"progressToken"}:
        return None
    token = meta.get("progressToken")
    if token is not None and not _valid_id(token):
        return None
    if name not in FAST_TOOLS and (name in TOOLS or services.direct.resolve(name) is None):
        return None
    return request_id, name, arguments, token


def _reply(
    services: Services,
    wire: HostWire,
    request_id: RequestId,
    result: types.CallToolResult | Passed,
    own: bool,
) -> Iterable[bytes | memoryview]:
    """The whole answer line (in parts, a backend's bytes read as they are written), as the SDK
    server writes it for the slow path's result."""
    events, pending = services.events.take(), services.questions.for_client()
    if isinstance(result, Passed):
        body = _with_blocks(result.body, envelope_blocks(events, pending, services.journal.fault))
        if body is not None:
            head = (b'{"jsonrpc":"2.0","id":', json.dumps(request_id).encode(), b',"result":')
            return itertools.chain(head, body, (b"}",))
        result = result.model()
    reply = with_envelope(result, events, pending, own=own, journal_fault=services.journal.fault)
    dumped = reply.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert wire.protocol is not None
    shaped = with_next_token(methods.serialize_server_result("tools/call", wire.protocol, dumped))
    message = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=shaped)
    return (message.model_dump_json(by_alias=True, exclude_unset=True).encode(),)


def _with_blocks(body: spool.Held, extra: dict[str, Any]) -> Iterable[bytes | memoryview] | None:
    """A backend's result bytes with the envelope's text blocks appended to its content, exactly as
    the slow path would write them; None when the bytes are not of the shape that allows it."""
    if not extra:
        return body.chunks()
    found = _content_end(body.chunks())
    if found is None:
        return None
    end, empty = found
    blocks = [
        pydantic_core.to_json({"text": as_json({key: value}), "type": "text"}) for key, value in extra.items()
    ]
    added = (b"" if empty else b",") + b",".join(blocks)
    return _inserted(body.chunks(), end, added)


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


CONTENT_END = b'],"isError":'  # after a plain result's content (calls/raw_step.canonical's order)


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
    text = first[: spool.CHUNK_BYTES].decode(errors="replace")  # its _meta, whole in there, or None
    try:
        _, meta_end = json.JSONDecoder().raw_decode(text, len('{"_meta":'))
    except ValueError:
        return None
    at = len(text[:meta_end].encode(errors="replace"))
    return at + len(b',"content":') if first.startswith(b',"content":[', at) else None


def _progress_sender(wire: HostWire, token: str | int) -> Any:
    async def send(progress: float, total: float | None = None, message: str | None = None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)
        await wire.send_line(note.model_dump_json(by_alias=True, exclude_unset=True).encode())

    return send


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
