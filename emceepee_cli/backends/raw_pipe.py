"""Raw tool calls on a stdio backend's pipes, beside its SDK session: the fast lane's backend side.

A fast call writes its own `tools/call` line with an id `ee-fast-N`. That is a string, and the
SDK session numbers its requests with integers, so the two can never collide. The transport
offers every line the backend writes to `Exchanges.deliver` before the session sees it: the
answer to a fast call (kept as the bytes the backend wrote) and the `notifications/progress`
carrying a fast call's token go to that call; everything else — questions, logs, the
session's own answers — goes on to the session as before.

When the connection ends, every pending fast call fails the way a session call does (MCPError
CONNECTION_CLOSED), so the caller reports a dying backend exactly as the slow path would; an
answer the transport refused unread (over the line limit) fails its call with `TooLong`, as on the
slow path. A cancelled fast call tells the backend (`notifications/cancelled`), as the SDK does.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp import MCPError

from emceepee_cli.backends.failures import Refused
from emceepee_cli.jsonrpc import RESPONSE_HEAD

log = logging.getLogger(__name__)

ID_PREFIX = "ee-fast-"
MARK = b'"' + ID_PREFIX.encode()
CANCEL_WRITE_S = 1.0  # telling the backend of a cancellation, shielded

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
WriteFn = Callable[[bytes], Awaitable[None]]


@dataclass
class Answer:
    """The line that answered a fast call; `doc` when it had to be parsed to be recognised."""

    request_id: str
    line: bytes
    doc: dict[str, Any] | None = None


@dataclass(eq=False)
class _Pending:
    on_progress: ProgressFn
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None
    refused: Refused | None = None


def loads(data: bytes) -> Any:
    """JSON, as the SDK's own parser reads it (pydantic_core, several times faster than json on a
    big result). What it refuses — a lone surrogate, nesting past about 200 levels — raises
    ValueError, so a fast call refuses what the slow path refuses: the transport fails the call
    whose answer it is, with the reason."""
    return pydantic_core.from_json(data)


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Exchanges:
    def __init__(self, write: WriteFn) -> None:
        self._write = write
        self._pending: dict[str, _Pending] = {}
        self._next = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<Exchanges pending={len(self._pending)} closed={self.closed}>"

    async def call(self, tool: str, arguments: dict[str, Any] | None, on_progress: ProgressFn) -> Answer:
        """Send one `tools/call` and wait for the line that answers it."""
        if self.closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        self._next += 1
        request_id = f"{ID_PREFIX}{self._next}"
        pending = self._pending[request_id] = _Pending(on_progress)
        params: dict[str, Any] = {"name": tool, "_meta": {"progressToken": request_id}}
        if arguments is not None:
            params["arguments"] = arguments
        request = dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        try:
            try:
                await self._write(request)
            except OSError as exc:  # as the session's stream would say it: the backend went away
                raise anyio.BrokenResourceError from exc
            await pending.done.wait()
        except anyio.get_cancelled_exc_class():
            if self._pending.pop(request_id, None) is not None and not self.closed:
                await self._cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.refused is not None:
            raise pending.refused
        if pending.answer is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return pending.answer

    async def _cancel(self, request_id: str) -> None:
        note = {"requestId": request_id, "reason": "cancelled by the caller"}
        gone = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)  # its death is told elsewhere
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WRITE_S), contextlib.suppress(*gone):
            await self._write(dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}))

    async def deliver(self, line: bytes) -> bool:
        """True if `line` belongs to a fast call (its answer or its progress) and was handed over."""
        if MARK not in line:
            return False
        request_id = _quick_id(line)
        if request_id is not None:
            self._answered(Answer(request_id, line))
            return True
        try:
            doc = loads(line)
        except (ValueError, RecursionError):
            return False  # the session reports the garbage
        if not isinstance(doc, dict):
            return False
        request_id = doc.get("id")
        if "method" not in doc and isinstance(request_id, str) and request_id.startswith(ID_PREFIX):
            self._answered(Answer(request_id, line, doc))
            return True
        if doc.get("method") == "notifications/progress":
            return await self._progress(doc.get("params"))
        return False

    def _answered(self, answer: Answer) -> None:
        pending = self._pending.pop(answer.request_id, None)
        if pending is None:  # the call was cancelled meanwhile: nobody wants its answer
            log.debug("dropped the late answer to %s", answer.request_id)
            return
        pending.answer = answer
        pending.done.set()

    def refuse(self, request_id: str | int, refusal: Refused) -> bool:
        """The answer to `request_id` was refused unread; True if it was a fast call's (it fails)."""
        pending = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if pending is None:
            return False
        pending.refused = refusal
        pending.done.set()
        return True

    async def _progress(self, params: Any) -> bool:
        if not isinstance(params, dict):
            return False
        token = params.get("progressToken")
        if not (isinstance(token, str) and token.startswith(ID_PREFIX)):
            return False
        pending = self._pending.get(token)
        progress, total, message = params.get("progress"), params.get("total"), params.get("message")
        if pending is not None and isinstance(progress, int | float) and not isinstance(progress, bool):
            await pending.on_progress(
                float(progress),
                float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None,
                message if isinstance(message, str) else None,
            )
        return True

    def close(self) -> None:
        """The connection is over: every pending call fails as closed."""
        self.closed = True
        for pending in self._pending.values():
            pending.done.set()
        self._pending.clear()


_PREFIX = RESPONSE_HEAD + MARK


def _quick_id(line: bytes) -> str | None:
    """The id of an answer in the SDK's compact shape, `{"jsonrpc":"2.0","id":"ee-fast-N","result":…`
    (tests/test_jsonrpc.py holds the SDK to it)."""
    if not line.startswith(_PREFIX):
        return None
    end = line.find(b'"', len(_PREFIX))
    if end < 0 or not line[len(_PREFIX) : end].isdigit():
        return None
    rest = line[end + 1 : end + 12]
    if not (rest.startswith(b',"result":') or rest.startswith(b',"error":')):
        return None
    return line[1 + len(b'"jsonrpc":"2.0","id":"') : end].decode()
