"""What a front remembers of its host's MCP session, so that a new fleet can take it up when the
fleet serving it dies: the `Book`.

The front hands the book every line the host sends (`host_line`, before it goes to the fleet:
hosts send little, so each is parsed with json) and every whole line the fleet sends
(`fleet_line`, before it goes to the host: fleet lines can be big, so only their head is read,
as the SDK writes it, `RESPONSE_HEAD`). From them it keeps:

- the handshake: the host's `initialize` request, once the fleet answered it with a result (and
  the protocol version it agreed), whether `notifications/initialized` followed, the last
  `logging/setLevel`, and the resources subscribed to and not unsubscribed from. A 2026-07-28
  host sends no `initialize` (its era is in each request's `_meta`): it has nothing to replay;
- the host's requests in flight (id → method), until the fleet answers them or the host cancels
  them (`notifications/cancelled`);
- the fleet's own requests to the host (elicitation, sampling, roots/list, ping) not yet answered.

Ids are matched as the SDK matches them (`correlated`: "7" is 7), answers written with the id as
sent. When the fleet dies (`fleet_died`), each request in flight gets its answer from the front: a
`tools/call` a result with `isError` (a call that had become a task lives on in the journal:
`list_tasks` shows it, interrupted or re-driven by the new fleet), any other request a JSON-RPC
error (-32603). The fleet's unanswered requests die with it: the host's answers to them are
dropped (`host_line` returns None), never handed to the new fleet, which never asked. A new
fleet reusing such an id for a request of its own takes it back: from then on the host's answers
to that id are its.

To the new fleet the front sends `replay()`: the remembered `initialize` under a private id
(`PRIVATE_PREFIX`), whose answer the front drops (the host sees one initialize response, ever)
and checks (`replayed`: the same protocol version); then `notifications/initialized`, the level
and the subscriptions, under private ids too, whose answers are dropped. An `initialize` still in
flight when the fleet died is sent again as the host wrote it: its answer is the host's.

The standard library only: the front imports this.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

RequestId = int | str

# How the SDK starts a message that has an id (emceepee_cli/jsonrpc.py's RESPONSE_HEAD): a response
# `{"jsonrpc":"2.0","id":7,"result":…` or `…,"error":…`, or a request `…,"method":…`.
RESPONSE_HEAD = b'{"jsonrpc":"2.0","id":'
ANSWER_MARKS = (b',"result":', b',"error":')
REQUEST_MARK = b',"method":'
ID_SCAN_BYTES = 64 * 1024  # an id longer than this is not looked for in a fleet line's head
INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")
PRIVATE_PREFIX = "emceepee-replay-"
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
INTERNAL_ERROR = -32603
CALL_LOST = (
    "emceepee's fleet (the process serving this host's tools) stopped while this call was in "
    "flight, and a new one took its place: this answer is lost. A call that had become a task goes "
    "on as one: list_tasks shows it (interrupted, or re-driven by the new fleet). Else, call the "
    "tool again if it is safe to repeat."
)


def valid_id(value: object) -> TypeGuard[RequestId]:
    """An id MCP allows: a string or an integer (never null, a boolean or a number with a point)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def correlated(request_id: RequestId) -> RequestId:
    """The id as the SDK's dispatcher correlates it (its `coerce_request_id`, mcp/shared/dispatcher.py):
    a string an int() reads is that integer, so a host answering the fleet's 7 with "7" answers it."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id


def request_lost(method: str) -> str:
    return (
        f"emceepee's fleet stopped before answering this {method} request, and a new one took its "
        "place: send it again"
    )


def lost_answer(request_id: RequestId, method: str) -> bytes:
    """The front's answer to a host request the dead fleet never answered."""
    if method == "tools/call":
        result = {"content": [{"type": "text", "text": CALL_LOST}], "isError": True}
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
    else:
        error = {"code": INTERNAL_ERROR, "message": request_lost(method)}
        message = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return _line(message)


def _line(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def head_id(data: bytes, at: int, end: int) -> tuple[RequestId, int] | None:
    """The id written at `data[at:]` (a JSON string or integer) and where it ends; None when it is
    neither, or a string longer than `ID_SCAN_BYTES`. A quote or a backslash is never part of a
    multi-byte UTF-8 character, so the string's end is found in the bytes."""
    limit = min(end, at + ID_SCAN_BYTES)
    if data.startswith(b'"', at):
        close = at + 1
        while True:
            close = data.find(b'"', close, limit)
            if close < 0:
                return None
            escapes = close - 1
            while data[escapes] == 0x5C:  # a backslash
                escapes -= 1
            if (close - 1 - escapes) % 2 == 0:
                break
            close += 1
        try:
            text = json.loads(data[at : close + 1])
        except ValueError:
            return None
        return (text, close + 1) if isinstance(text, str) else None
    found = INTEGER.match(data, at, limit)
    return None if found is None else (int(found.group()), found.end())


@dataclass(frozen=True)
class Replay:
    """What a new fleet is sent: `opening` first (its answer awaited), then `then`."""

    opening: bytes | None
    then: list[bytes]


@dataclass(frozen=True)
class Replayed:
    """The new fleet's answer to the replayed `initialize`: its protocol version, or its error."""

    version: str | None = None
    error: str | None = None

    def problem(self, agreed: str | None) -> str | None:
        """Why the host cannot go on with this fleet; None when it can."""
        if self.error is not None:
            return f"the new fleet refused this host's initialize: {self.error}"
        if agreed is not None and self.version != agreed:
            return f"the new fleet speaks MCP {self.version}, this host agreed on {agreed}"
        return None


class Book:
    """One host's session as the front sees it pass: what to answer, drop and replay."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the host's thread and the fleet's both write here
        self._answered_one = threading.Condition(self._lock)  # for `wait_answered`
        # the host's requests (by `correlated` id) → their ids as sent and methods
        self.in_flight: dict[RequestId, tuple[RequestId, str]] = {}
        self.asked: set[RequestId] = set()  # the fleet's requests the host has not answered
        self.dead_asked: set[RequestId] = set()  # those of a fleet that died
        self.initialize: bytes | None = None  # the host's initialize, answered with a result
        self.protocol: str | None = None  # the version that answer agreed
        self.initialized = False
        self.level: dict[str, Any] | None = None  # the last logging/setLevel's params
        self.subscribed: dict[str, dict[str, Any]] = {}  # uri → its resources/subscribe params
        self.replayed: Replayed | None = None
        self._initializing: dict[RequestId, bytes] = {}  # initialize requests in flight
        self._private: dict[str, str] = {}  # the front's own requests in flight → their methods
        self._serial = itertools.count(1)

    def __repr__(self) -> str:
        return (
            f"<Book in_flight={len(self.in_flight)} asked={len(self.asked)} dead={len(self.dead_asked)} "
            f"initialized={self.initialized} subscribed={len(self.subscribed)}>"
        )

    # ---- the host's lines ------------------------------------------------------------------

    def host_line(self, line: bytes) -> bytes | None:
        """Note one line of the host's; what the fleet gets of it (None: nothing). A line that is
        not JSON passes untouched: the fleet answers it as `serve` would."""
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            return line
        if isinstance(doc, dict):
            return line if self._host_message(cast(dict[str, Any], doc), line) else None
        if not isinstance(doc, list) or not doc:
            return line
        kept = [e for e in doc if not isinstance(e, dict) or self._host_message(cast(dict[str, Any], e))]
        if len(kept) == len(doc):
            return line
        return _line(kept) if kept else None

    def _host_message(self, message: dict[str, Any], raw: bytes | None = None) -> bool:
        """Note one message of the host's; whether it goes on to the fleet."""
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params")
        params = cast(dict[str, Any], params) if isinstance(params, dict) else {}
        if isinstance(method, str):
            if valid_id(request_id):
                self._host_request(request_id, method, params, raw or message)
            elif "id" not in message:
                self._host_notification(method, params)
            return True
        if valid_id(request_id) and ("result" in message or "error" in message):
            with self._lock:
                key = correlated(request_id)
                if key in self.dead_asked:
                    self.dead_asked.discard(key)
                    return False
                self.asked.discard(key)
        return True

    def _host_request(
        self, request_id: RequestId, method: str, params: dict[str, Any], raw: bytes | dict[str, Any]
    ) -> None:
        """Note a request of the host's (`raw`: its line, or its message when it came in a batch)."""
        with self._lock:
            key = correlated(request_id)
            self.in_flight[key] = (request_id, method)
            if method == "initialize":
                self._initializing[key] = raw if isinstance(raw, bytes) else _line(raw)
        uri = params.get("uri")
        if method == "logging/setLevel":
            self.level = params
        elif method == "resources/subscribe" and isinstance(uri, str):
            self.subscribed[uri] = params
        elif method == "resources/unsubscribe" and isinstance(uri, str):
            self.subscribed.pop(uri, None)

    def _host_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/cancelled" and valid_id(cancelled := params.get("requestId")):
            with self._lock:
                self.in_flight.pop(correlated(cancelled), None)
                self._initializing.pop(correlated(cancelled), None)

    # ---- the fleet's lines -----------------------------------------------------------------

    def fleet_line(self, data: bytes, start: int, end: int, whole: bool = True) -> bool:
        """Note the fleet's line `data[start:end]` (without its newline; when not `whole`, only its
        first bytes: a line too long to hold, already on its way to the host); whether the host
        gets it. Only its head is read, but for an answer to an `initialize` and a batch."""
        if not data.startswith(RESPONSE_HEAD, start):
            if whole and data.startswith(b"[", start):
                self._fleet_batch(data[start:end])
            return True
        found = head_id(data, start + len(RESPONSE_HEAD), end)
        if found is None:
            return True
        request_id, after = found
        if data.startswith(REQUEST_MARK, after):
            with self._lock:
                key = correlated(request_id)
                self.dead_asked.discard(key)  # a new fleet's question: answers to it are its own
                self.asked.add(key)
            return True
        if not data.startswith(ANSWER_MARKS, after):
            return True
        return self._answered(request_id, data[start:end] if whole else None)

    def _answered(self, request_id: RequestId, line: bytes | None) -> bool:
        """Note the fleet's answer to `request_id` (`line`: the whole of it, when it was held);
        whether the host gets it (not when it answers the front's own request)."""
        with self._lock:
            private = self._private.pop(request_id, None) if isinstance(request_id, str) else None
            key = correlated(request_id)
            flight = self.in_flight.pop(key, None) if private is None else None
            raw = self._initializing.pop(key, None) if flight is not None else None
            self._answered_one.notify_all()
        if private == "initialize":
            self.replayed = _initialize_answer(line)
        if raw is not None and line is not None:
            agreed = _initialize_answer(line)
            if agreed.error is None and self.initialize is None:
                self.initialize, self.protocol = raw, agreed.version
        return private is None or line is None

    def _fleet_batch(self, line: bytes) -> None:
        """The answers to a host's batch (MCP 2025-03-26), in one array."""
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            return
        for entry in doc if isinstance(doc, list) else []:
            if isinstance(entry, dict) and valid_id(request_id := cast(dict[str, Any], entry).get("id")):
                self._answered(request_id, None)

    # ---- the fleet's death and the next one ------------------------------------------------

    def fleet_died(self) -> list[bytes]:
        """The fleet is gone: the host's answers to its requests in flight. An `initialize` in flight
        before any was answered is kept, for `replay` to send again."""
        with self._lock:
            flights, self.in_flight = self.in_flight, {}
            self.dead_asked |= self.asked
            self.asked = set()
            self._private.clear()
            answers = []
            for key, (request_id, method) in flights.items():
                if method == "initialize" and self.initialize is None and key in self._initializing:
                    self.in_flight[key] = (request_id, method)
                    continue
                self._initializing.pop(key, None)
                answers.append(lost_answer(request_id, method))
            self._answered_one.notify_all()
        return answers

    def wait_answered(self, timeout_s: float) -> bool:
        """Wait until the fleet has answered every request of the host's in flight, at most
        `timeout_s`; whether it has."""
        with self._answered_one:
            return self._answered_one.wait_for(lambda: not self.in_flight, timeout_s)

    def replay(self) -> Replay:
        """What a new fleet is sent to take up this host's session (`replayed` is then awaited)."""
        self.replayed = None
        if self.initialize is None:
            with self._lock:
                return Replay(None, list(self._initializing.values()))
        opening = _with_id(self.initialize, self._private_id("initialize"))
        then = [INITIALIZED] if self.initialized else []
        if self.level is not None:
            then.append(self._private_request("logging/setLevel", self.level))
        then.extend(self._private_request("resources/subscribe", p) for p in self.subscribed.values())
        return Replay(opening, then)

    def _private_id(self, method: str) -> str:
        private = f"{PRIVATE_PREFIX}{next(self._serial)}"
        with self._lock:
            self._private[private] = method
        return private

    def _private_request(self, method: str, params: dict[str, Any]) -> bytes:
        return _line({"jsonrpc": "2.0", "id": self._private_id(method), "method": method, "params": params})


def _with_id(raw: bytes, request_id: str) -> bytes:
    doc = json.loads(raw)
    doc["id"] = request_id
    return _line(doc)


def _initialize_answer(line: bytes | None) -> Replayed:
    """The protocol version an answer to `initialize` agrees, or its error."""
    try:
        doc = json.loads(line) if line is not None else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return Replayed(error="its answer could not be read")
    answer = cast(dict[str, Any], doc)
    error, result = answer.get("error"), answer.get("result")
    if isinstance(error, dict):
        return Replayed(error=str(cast(dict[str, Any], error).get("message")))
    if isinstance(result, dict) and isinstance(
        version := cast(dict[str, Any], result).get("protocolVersion"), str
    ):
        return Replayed(version=version)
    return Replayed(error="its answer holds no protocol version")
