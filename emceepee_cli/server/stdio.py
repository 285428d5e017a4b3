"""The stdio wire to the host: JSON-RPC lines in, JSON-RPC lines out, and an answer for every bad line.

We read stdin ourselves rather than through the SDK's `stdio_server`, which hands a line it
cannot parse to the session as an exception that is only logged at debug level: a host that
sent a malformed request would wait for its answer for ever. Here, per JSON-RPC 2.0:

- a line that is not JSON (or not UTF-8, or nested past the parser's limit, or longer than
  `MAX_LINE_BYTES`) gets `-32700 Parse error` with id null;
- a request whose params hold a lone surrogate or nest past `host_input.MAX_DEPTH` gets
  `-32602 Invalid params` with its id, naming the field (server/host_input.py), whether or not
  the SDK's parser could read the line;
- JSON that is not a valid message gets `-32600 Invalid Request`, with its id when it has a
  valid one (a string or an integer; MCP forbids null), else null;
- an answer to one of our requests (elicitation/create, sampling/createMessage, roots/list)
  that cannot be used — malformed, or holding a lone surrogate or nesting past the limit, whether
  or not the SDK's parser read it — fails that request at once as the host's, naming the field
  (server/host_answers.py), rather than leave it to its timeout. Nothing is written back
  (answering an answer invites a loop); one whose id cannot be read is logged and dropped, or,
  when the SDK's parser cannot read its line, gets the `-32700` above;
- an array is a JSON-RPC batch. Only MCP 2025-03-26 has batches; a host that negotiated that
  version gets one array holding the replies to the batch's requests (and the errors for its
  invalid entries), once all are done. Each entry is checked as a line alone is, a request
  holding a lone surrogate or nested too deep getting its own `-32602`, so the batch's other
  entries are still answered. Under any other version an array is one `-32600`.

Blank lines are ignored. Nothing the host sends ends the process: only stdin's EOF does.

Every line written is the SDK's bytes for its message, made in one module with the fast lane's
(emceepee_cli/jsonrpc.py); the errors for what the host sent wrong are server/wire_errors.py.

Lifecycle: `host_streams()` claims fd 0 and 1 for the wire (server/stdio_fds.py: a stray print
cannot corrupt the protocol; in the fleet it is given the host's socket instead), then a reader
and a writer task run beside the server until stdin's EOF closes the read stream; a pipe or a
socket is read and written on the event loop, a terminal or a file in a worker thread.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
import pydantic
import pydantic_core
from mcp.shared.message import SessionMessage

from emceepee_cli import jsonrpc
from emceepee_cli.calls import spool
from emceepee_cli.jsonrpc import RequestId, valid_id
from emceepee_cli.server import host_answers, host_input, stdio_fds, wire_errors

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024  # one message; the host's sampling answers can carry images
JOIN_BYTES = 256 * 1024  # parts of a reply smaller than this are joined into one write
BATCH_VERSION = "2025-03-26"  # the one MCP version whose JSON-RPC layer has batches

ReadStream = anyio.abc.ObjectReceiveStream[SessionMessage | Exception]
WriteStream = anyio.abc.ObjectSendStream[SessionMessage]


class LineTaker(Protocol):
    """Something that may answer a request line itself, before the SDK server sees it (the fast lane)."""

    def take(self, raw: bytes, wire: HostWire) -> bool: ...
    def cancelled(self, request_id: RequestId) -> None: ...


TAKEN_MARK = b'"tools/call"'  # only lines holding it are offered to the taker


@dataclass
class _Batch:
    """The replies to one batch, held until every request in it has been answered."""

    waiting: set[RequestId] = field(default_factory=set[RequestId])
    replies: list[str] = field(default_factory=list[str])


@asynccontextmanager
async def host_streams(
    taker: LineTaker | None = None, fds: tuple[int, int] | None = None
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The server's streams over this process's stdin and stdout, or over `fds` (in, out): a
    connection to the fleet (emceepee_cli/fleet/daemon.py), whose descriptor its caller closes."""
    wire_in, wire_out = stdio_fds.claim_std_fds() if fds is None else fds
    wire = HostWire(wire_out, taker, on_loop=stdio_fds.on_loop(wire_out))
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_pump_in, wire_in, wire, to_server, stdio_fds.on_loop(wire_in))
        tg.start_soon(_pump_out, from_server, wire)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()


class HostWire:
    """What one connection's lines mean: routing in, replies out, batches, the negotiated version."""

    def __init__(self, out_fd: int, taker: LineTaker | None = None, on_loop: bool = False) -> None:
        self.out_fd = out_fd
        self.taker = taker
        self.on_loop = on_loop  # a non-blocking pipe or socket: written on the event loop
        self.protocol: str | None = None  # from our answer to `initialize`
        self.broken = False
        self._lock = anyio.Lock(fast_acquire=True)  # no trip round the loop when nobody else writes
        self._initialize: set[RequestId] = set()
        self._batches: dict[RequestId, _Batch] = {}

    # ---- in -------------------------------------------------------------------------------

    async def line(
        self, raw: bytes, to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Route one line from the host: to the server, or back to the host as an error."""
        if not raw.strip():
            return
        if self.taker is not None and TAKEN_MARK in raw and self.taker.take(raw, self):
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
        except pydantic.ValidationError:
            await self._rejected(raw, to_server)
            return
        if isinstance(message, types.JSONRPCNotification) and wire_errors.has_id(raw):
            # `"id": null` or `true` parses as a notification; it was meant as a request.
            await self.send_error(
                None, types.INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer"
            )
            return
        if isinstance(message, types.JSONRPCRequest) and await self._refused(raw, message.id, message.params):
            return
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            await self._pass_answer(host_answers.checked(raw, message), to_server)
            return
        self._note(message)
        await to_server.send(SessionMessage(message))

    async def _refused(self, raw: bytes, request_id: RequestId, params: object) -> bool:
        """Answer a request whose params hold what nothing here can carry (server/host_input.py)."""
        wrong = host_input.fault(raw, params)
        if wrong is None:
            return False
        log.warning("refused request %s: %s", json.dumps(request_id)[:100], wrong)
        await self.send_error(request_id, types.INVALID_PARAMS, f"Invalid params: {wrong}")
        return True

    async def overlong(self) -> None:
        message = f"Parse error: a line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB was dropped"
        await self.send_error(None, types.PARSE_ERROR, message)

    async def _pass_answer(
        self,
        answer: types.JSONRPCMessage | None,
        to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception],
    ) -> None:
        if answer is not None:
            await to_server.send(SessionMessage(answer))

    async def _rejected(
        self, raw: bytes, to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> None:
        try:
            doc = pydantic_core.from_json(raw)
        except ValueError as exc:
            if not await self._lenient(raw, to_server):
                await self.send_error(None, types.PARSE_ERROR, f"Parse error: {exc}")
            return
        if isinstance(doc, list):
            await self._batch(raw, doc, to_server)
            return
        if host_answers.is_answer(doc):
            await self._pass_answer(host_answers.answer(raw, doc), to_server)
            return
        await self._write(jsonrpc.text(wire_errors.invalid(doc)))

    async def _lenient(
        self, raw: bytes, to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> bool:
        """A line the SDK's parser refused that `json` reads: a request holding a lone surrogate or
        nested too deep is answered with its own id (its host could not match a parse error to
        it), an answer of the host's fails the request it answers, and a batch is taken apart."""
        try:
            doc = host_input.lenient(raw)
        except ValueError:
            return False
        if isinstance(doc, list):
            await self._batch(raw, doc, to_server)
            return True
        if not (isinstance(doc, dict) and valid_id(doc.get("id"))):
            return False
        if host_answers.is_answer(doc):
            await self._pass_answer(host_answers.answer(raw, doc), to_server)
            return True
        return isinstance(doc.get("method"), str) and await self._refused(raw, doc["id"], doc.get("params"))

    async def _batch(
        self, raw: bytes, items: list[Any], to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception]
    ) -> None:
        if not items or self.protocol != BATCH_VERSION:
            why = "an empty batch" if not items else wire_errors.no_batches(self.protocol)
            await self.send_error(None, types.INVALID_REQUEST, f"Invalid Request: {why}")
            return
        batch, messages = _Batch(), []
        for item in items:
            reply, message = wire_errors.batch_entry(raw, item)
            if reply is not None:
                batch.replies.append(jsonrpc.text(reply))
            if message is None:
                continue
            if isinstance(message, types.JSONRPCRequest):
                batch.waiting.add(message.id)
                self._batches[message.id] = batch
            self._note(message)
            messages.append(message)
        if not batch.waiting and batch.replies:
            await self._write("[" + ",".join(batch.replies) + "]")
        for message in messages:
            await to_server.send(SessionMessage(message))

    def _note(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
            self._initialize.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request may never be answered; its batch must not wait for it.
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, int | str) and cancelled in self._batches:
                self._batches.pop(cancelled).waiting.discard(cancelled)
            if isinstance(cancelled, int | str) and self.taker is not None:
                self.taker.cancelled(cancelled)

    # ---- out ------------------------------------------------------------------------------

    async def outgoing(self, message: types.JSONRPCMessage) -> int:
        """Write one message from the server; a reply to a batched request joins its batch.
        How many bytes were written (0 while a batch waits)."""
        request_id = getattr(message, "id", None)
        if request_id in self._initialize:
            self._initialize.discard(request_id)
            if isinstance(message, types.JSONRPCResponse):
                version = message.result.get("protocolVersion")
                self.protocol = version if isinstance(version, str) else None
        batch = self._batches.pop(request_id, None) if request_id is not None else None
        line = wire_errors.line_or_error(message)
        if line is None:
            return 0
        if batch is None:
            return await self._write(line)
        batch.replies.append(line)
        batch.waiting.discard(request_id)
        if not batch.waiting:
            return await self._write("[" + ",".join(batch.replies) + "]")
        return 0

    async def send_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        await self._write(jsonrpc.text(jsonrpc.error(request_id, message, code)))

    async def send_line(self, *parts: bytes) -> None:
        """One whole message, already serialized (the fast lane's), perhaps in parts."""
        await self.send_parts(parts)

    async def send_parts(self, parts: Iterable[bytes | memoryview]) -> None:
        """One whole message from its parts, read as it is written: small parts are joined into
        one write, a big one (a result's bytes, or a spooled result's chunks) is written as it
        is, never copied into the line."""
        async with self._lock:
            joined: list[bytes | memoryview] = []
            size = 0
            for part in itertools.chain(parts, (b"\n",)):
                if len(part) >= JOIN_BYTES:
                    await self._emit(b"".join(joined))
                    await self._emit(part)
                    joined, size = [], 0
                    continue
                joined.append(part)
                size += len(part)
                if size >= JOIN_BYTES:
                    await self._emit(b"".join(joined))
                    joined, size = [], 0
            await self._emit(b"".join(joined))

    async def _write(self, line: str) -> int:
        data = line.encode()  # not (line + "\n"): that would be one more copy of a big reply
        await self.send_parts((data,))
        return len(data)

    async def _emit(self, data: bytes | memoryview) -> None:
        """Write `data` (the caller holds the lock); a host gone means nothing is written."""
        if self.broken or not data:
            return
        try:
            if self.on_loop:
                await stdio_fds.write_on_loop(self.out_fd, data)
            else:
                await anyio.to_thread.run_sync(stdio_fds.write_all, self.out_fd, data)
        except OSError as exc:  # the host closed its end; stdin's EOF follows and ends serve
            self.broken = True
            log.warning("cannot write to the host (%s); dropping replies until stdin closes", exc)


async def _pump_in(
    fd: int,
    wire: HostWire,
    to_server: anyio.abc.ObjectSendStream[SessionMessage | Exception],
    on_loop: bool = False,
) -> None:
    """Read stdin in bounded chunks, cut it into lines, hand each to the wire; close at EOF."""
    async with to_server:
        buffer = bytearray()
        skipping = False  # inside a line that grew past MAX_LINE_BYTES, until its newline
        while chunk := await stdio_fds.read_chunk(fd, on_loop):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if not skipping:
                    buffer += chunk[start:end]
                    await wire.line(bytes(buffer), to_server)
                buffer.clear()
                skipping, start = False, end + 1
            if not skipping:
                buffer += chunk[start:]
                if len(buffer) > MAX_LINE_BYTES:
                    buffer.clear()
                    skipping = True
                    await wire.overlong()
        if buffer and not skipping:
            await wire.line(bytes(buffer), to_server)


async def _pump_out(from_server: anyio.abc.ObjectReceiveStream[SessionMessage], wire: HostWire) -> None:
    async with from_server:
        async for session_message in from_server:
            size = await wire.outgoing(session_message.message)
            del session_message  # the reply's model: gone before memory is given back
            spool.give_back(size)
