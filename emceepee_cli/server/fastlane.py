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
raw (calls/raw_step.py). What comes back is written as the SDK server would write it, by the
module the slow lane's wire writes with too (emceepee_cli/jsonrpc.py): the backend's result bytes
with the host's id when they came raw (or were read back from the journal, a task's), the
envelope's text blocks put in at the end of their content, else the same result (with its
envelope blocks) serialized as the SDK does. A host's
`notifications/cancelled` cancels it as the SDK cancels a handler: no answer is written.

`EMCEEPEE_FAST_LANE=0` in serve's environment turns the lane off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli import jsonrpc
from emceepee_cli.backends.raw_pipe import loads
from emceepee_cli.calls import spool
from emceepee_cli.calls.call import InputRound, Passed, Relay
from emceepee_cli.jsonrpc import RequestId
from emceepee_cli.server import host_input
from emceepee_cli.server.envelope import block_texts, envelope_blocks, with_envelope
from emceepee_cli.server.meta_tools import TOOLS, Call
from emceepee_cli.server.resume_wire import with_next_token
from emceepee_cli.server.stdio import HostWire
from emceepee_cli.session.wiring import Services

log = logging.getLogger(__name__)

FAST_TOOLS = ("execute_tool", "get_task_result")  # meta-tools whose answer may be a backend's bytes

Dispatch = Callable[
    [Services, str, dict[str, Any] | None, Call],
    Awaitable[tuple[types.CallToolResult | Passed | InputRound, bool]],
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
            assert not isinstance(result, InputRound), result  # only a 2026-07-28 host's call has rounds
            if isinstance(result, Passed):
                passed.append(result)
            parts = _reply(services, wire.protocol, request_id, result, own)
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
    if doc["jsonrpc"] != "2.0" or doc["method"] != "tools/call" or not jsonrpc.valid_id(request_id):
        return None
    if not isinstance(params, dict) or not params.keys() <= {"name", "arguments", "_meta"}:
        return None
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta", {})
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    if not isinstance(meta, dict) or not meta.keys() <= {"progressToken"}:
        return None
    token = meta.get("progressToken")
    if token is not None and not jsonrpc.valid_id(token):
        return None
    if name not in FAST_TOOLS and (name in TOOLS or services.direct.resolve(name) is None):
        return None
    return request_id, name, arguments, token


def _reply(
    services: Services,
    protocol: str | None,
    request_id: RequestId,
    result: types.CallToolResult | Passed,
    own: bool,
) -> Iterable[bytes | memoryview]:
    """The whole answer line (in parts, a backend's bytes read as they are written), as the SDK
    server writes it for the slow path's result (emceepee_cli/jsonrpc.py)."""
    events, pending = services.events.take(), services.questions.for_client()
    if isinstance(result, Passed):
        texts = block_texts(envelope_blocks(events, pending, services.journal.fault))
        body = jsonrpc.with_text_blocks(result.body.chunks, texts)
        if body is not None:
            return jsonrpc.reply_parts(request_id, body)
        result = result.model()
    reply = with_envelope(result, events, pending, own=own, journal_fault=services.journal.fault)
    assert protocol is not None  # the lane takes a line only once the version is known
    return (jsonrpc.reply(request_id, with_next_token(jsonrpc.tool_result(reply, protocol))),)


def _progress_sender(wire: HostWire, token: RequestId) -> Any:
    async def send(done: float, total: float | None = None, message: str | None = None) -> None:
        await wire.send_line(jsonrpc.progress(token, done, total, message))

    return send
