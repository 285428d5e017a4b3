"""One backend tool call in flight, and what the host gets for it.

`Call` is the in-memory side of a call (promoted to a task or not): its cancel scope, its
wake-up event, its progress, and once it is over how it ended (one `CallEnd`, calls/end.py).
`task_row` and `final_row` are its task as journaled (or as shown when the journal could not take
it); `outcome` turns a journaled task into what the host receives, `ProxyTask` and `WorkingTask`
are our answers while it is a task, `InputRound` the one while a 2026-07-28 host answers its questions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli.calls.chain import Chain
from emceepee_cli.calls.end import CallEnd, KeptRaw, Returned, ReturnedRaw
from emceepee_cli.calls.policy import Follow
from emceepee_cli.calls.spool import Held
from emceepee_cli.clock import now_iso
from emceepee_cli.errors import SERVERS_STEP, EmceepeeError, Hints, hints, logs_step
from emceepee_cli.ids import new_id
from emceepee_cli.store.records import FINISHED_TASK, BadTransition, TaskJson, TaskRow, TaskStatus, task_json
from emceepee_cli.store.unreadable import UnreadableRow

log = logging.getLogger(__name__)

PROGRESS_HEARTBEAT_S = 10.0  # while a host waits with a progressToken, it hears from us at least this often
HEARTBEAT_ENV = "EMCEEPEE_PROGRESS_HEARTBEAT_S"  # a test switch: heartbeats this often instead

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


class Relay:
    """Progress for one waiting upstream request; values only ever increase, as MCP requires."""

    def __init__(self, send: ProgressFn) -> None:
        self._send: ProgressFn | None = send
        self.last = 0.0
        self.sent_at = time.monotonic()
        self.every = heartbeat_s()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self._send is None:
            return
        self.last = max(progress, self.last + 1e-6)
        self.sent_at = time.monotonic()
        try:
            await self._send(self.last, total, message)
        except Exception as exc:  # noqa: BLE001 - the host's request is gone; progress is best effort
            log.debug("progress relay stopped: %r", exc)
            self._send = None

    async def heartbeat(self, what: str) -> None:
        started = time.monotonic()
        while True:
            await anyio.sleep(max(0.0, self.sent_at + self.every - time.monotonic()))
            if time.monotonic() - self.sent_at >= self.every:
                await self(self.last, None, f"still waiting for {what} ({time.monotonic() - started:.0f} s)")

    async def beside(self, what: str, work: Callable[[], Awaitable[None]]) -> None:
        """`work`, with a heartbeat naming `what` meanwhile."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.heartbeat, what)
            await work()
            tg.cancel_scope.cancel()


def heartbeat_s() -> float:
    value = os.environ.get(HEARTBEAT_ENV, "")
    try:
        return max(0.01, float(value)) if value else PROGRESS_HEARTBEAT_S
    except ValueError:
        return PROGRESS_HEARTBEAT_S


class CallState(StrEnum):
    RUNNING = "running"  # the host waits on execute_tool; no task row exists
    PROMOTED = "promoted"  # a working task: its row is (being) journaled
    ANSWERED = "answered"  # ended before any promotion: the result went straight back to the host
    FINISHED = "finished"  # ended as a task: its end is journaled


# state -> {next state: why}; the one table `Call.move` checks and the diagrams draw.
CALL_TRANSITIONS: dict[CallState, dict[CallState, str]] = {
    CallState.RUNNING: {
        CallState.PROMOTED: "it outlived timeout_ms, or it waits on a question",
        CallState.ANSWERED: "it ended while the host still waited (result, error or host cancel)",
    },
    CallState.PROMOTED: {
        CallState.FINISHED: "it ended: completed, failed, cancelled, expired or interrupted",
    },
}

ENDED = (CallState.ANSWERED, CallState.FINISHED)


@dataclass(frozen=True)
class Passed:
    """A backend's result as the bytes the host gets, unparsed (the fast lane's, calls/raw_step.py),
    held within the result budget (calls/spool.py) until it is delivered."""

    body: Held

    def model(self) -> types.CallToolResult:
        """The result as a model; the bytes are then released."""
        try:
            return types.CallToolResult.model_validate_json(self.body.read(), by_name=False)
        finally:
            self.body.release()


@dataclass(eq=False)
class Call:
    """One backend tool call in flight, promoted or not.

    Its state changes only through `move`; how it ended (`end`) is said once, through `conclude`,
    before it moves to an end state. `row_written` is set once the promotion's journal write has
    ended (well or not), `settled` once the end of a promoted call is journaled (or that failed):
    every wait on either is bounded by the waiter.
    """

    server: str
    tool: str
    args: dict[str, Any] | None
    ttl_s: float
    call_id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=now_iso)
    started: float = field(default_factory=time.monotonic)
    state: CallState = CallState.RUNNING
    wake: anyio.Event = field(default_factory=anyio.Event)  # replaced each time it fires: done, or a question
    row_written: anyio.Event = field(default_factory=anyio.Event)
    settled: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    unjournaled: EmceepeeError | None = None  # why its task row could not be written
    relay: Relay | None = None
    awaiting_backend: bool = False  # its backend is still starting: the call waits for it first
    progress: dict[str, Any] | None = None
    progress_written: float = 0.0
    progress_announced: float = field(default_factory=time.monotonic)  # first summary after PROGRESS_EVENT_S
    follow: Follow | None = None  # how its results' suggestions and resume tokens are followed
    token: str | None = None  # a backend's resume token its first request carries
    chain: Chain | None = None  # its steps, once it runs
    fast: bool = False  # it came by the fast lane: its backend may be called raw (calls/raw_step.py)
    stopped_as: TaskStatus | None = field(default=None, init=False)  # why `stop` cancelled it
    _end: CallEnd | None = field(default=None, init=False, repr=False)

    def __repr__(self) -> str:
        return f"<Call {self.call_id} {self.server}.{self.tool} {self.state}>"

    @property
    def promoted(self) -> bool:
        return self.state in (CallState.PROMOTED, CallState.FINISHED)

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def expired(self) -> bool:
        return time.monotonic() - self.started > self.ttl_s

    def move(self, to: CallState) -> bool:
        """The one way a call changes state. False if it is already there (so promotion is idempotent)."""
        if to == self.state:
            return False
        if to not in CALL_TRANSITIONS.get(self.state, {}):
            raise BadTransition(f"call {self.call_id}: {self.state} -> {to} is not a transition")
        self.state = to
        self.nudge()
        return True

    @property
    def end(self) -> CallEnd | None:
        """How the call ended (calls/end.py); None while it runs. Set before `close` moves it to an
        end state, so whoever wakes on `ended` finds it."""
        return self._end

    def conclude(self, end: CallEnd) -> None:
        """Say how the call ended: once. The runner does when the call's work is over, or the fast
        lane as soon as a raw result arrives (calls/raw_step.py): nothing after that changes it. A
        second end is a bug in emceepee, so it raises `BadTransition`."""
        if self._end is not None:
            raise BadTransition(f"call {self.call_id} already ended as {self._end!r}, not also as {end!r}")
        self._end = end

    def reform(self, end: Returned | KeptRaw) -> None:
        """The same raw result in another form: a model (kept in memory), or journaled and let go."""
        if not isinstance(self._end, ReturnedRaw):
            raise BadTransition(f"call {self.call_id}: only a raw result changes form, not {self._end!r}")
        self._end = end

    def stop(self, why: TaskStatus) -> None:
        """Cancel the call for real (its backend gets notifications/cancelled), saying why: unless
        its result came first, the runner ends it as `Stopped(why)` (the last reason given wins).
        The one way its scope is cancelled, so a cancelled call always has a reason."""
        self.stopped_as = why
        self.scope.cancel()

    def close(self) -> CallState:
        """Move to the end state that fits: answered if nobody promoted it, else finished."""
        if self._end is None:
            raise BadTransition(f"call {self.call_id} cannot close before it says how it ended")
        self.move(CallState.FINISHED if self.promoted else CallState.ANSWERED)
        return self.state

    def nudge(self) -> None:
        fired, self.wake = self.wake, anyio.Event()
        fired.set()


def as_model(call: Call) -> None:
    """A raw result, turned into the model a result kept in memory is (never the stand-in); its
    bytes are then released."""
    raw = call.end
    assert isinstance(raw, ReturnedRaw), raw
    result = Passed(raw.body).model()
    call.reform(Returned(result))
    if call.chain is not None and call.chain.steps:
        call.chain.steps[0].result, call.chain.steps[0].dirty = result, True


def task_row(call: Call, instance_id: str) -> TaskRow:
    """The task row of a promoted call, as journaled (and as shown if journaling failed)."""
    return TaskRow(
        task_id=call.call_id,
        instance_id=instance_id,
        server=call.server,
        tool=call.tool,
        args=json.dumps(call.args),
        status=TaskStatus.WORKING.value,
        status_message=awaiting_start(call.server) if call.awaiting_backend else None,
        progress=json.dumps(call.progress) if call.progress else None,
        result=None,
        error=None,
        created_at=call.created_at,
        last_updated_at=now_iso(),
        expires_at=now_iso(call.ttl_s - (time.monotonic() - call.started)),
        finished_at=None,
        cancel_requested=0,
        request_state=None,
        round=None,
    )


def awaiting_start(server: str) -> str:
    return f"waiting for backend '{server}' to start"


def final_row(call: Call, instance_id: str) -> TaskRow:
    """The task row of a promoted call that has ended, as journaled (or kept in memory)."""
    row, end = task_row(call, instance_id), call.end
    assert end is not None, call
    row["status"] = end.status.value
    if isinstance(end, Returned):
        row["result"] = end.result.model_dump_json(by_alias=True, exclude_none=True)
    row["error"] = end.error.message if end.error else None
    row["finished_at"] = now_iso()
    return row


def journal_warning(call: Call) -> dict[str, str] | None:
    """Tell the model when its task could not be journaled: a restart of emceepee would lose it."""
    if call.unjournaled is None:
        return None
    warning = {"type": type(call.unjournaled).__name__, "message": call.unjournaled.message}
    hint = "The call goes on and this emceepee keeps its result, but a restart would lose it."
    return {**warning, "hint": f"{call.unjournaled.hint} {hint}".strip()}


@dataclass(frozen=True)
class ProxyTask:
    """execute_tool's answer for a call that became a task: the task, what else waits on its
    server, its saga when it waits on questions, and why the journal could not take it, if not."""

    task: TaskJson
    pending_on_server: dict[str, Any]
    saga: dict[str, Any] | None = None
    journal_error: dict[str, str] | None = None

    def payload(self) -> dict[str, Any]:
        """The answer as the host reads it (its members in this order)."""
        saga = {"saga": self.saga} if self.saga is not None else {}
        warning = {"journal_error": self.journal_error} if self.journal_error is not None else {}
        return {"proxy_task": self.task, "pending_on_server": self.pending_on_server, **saga, **warning}


@dataclass(frozen=True)
class WorkingTask:
    """get_task_result's answer (and resume_tool's) for a task still working: the task, and its
    saga when it waits on questions."""

    task: TaskJson
    saga: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        """The answer as the host reads it."""
        return {"task": self.task, **({"saga": self.saga} if self.saga is not None else {})}


@dataclass(frozen=True)
class InputRound:
    """The answer to a 2026-07-28 host whose request can answer the call's own questions: ask them,
    then send the call again with the answers and `state` (calls/host_rounds.py). The call is a
    journaled task by then, so a host that never comes back leaves a task, as it would without."""

    task_id: str
    requests: types.InputRequests  # keyed by the questions' ids
    state: str  # sealed: the task, the round, the call, this serve, an expiry

    def result(self) -> types.InputRequiredResult:
        """The round as the host's request gets it."""
        return types.InputRequiredResult(input_requests=self.requests, request_state=self.state)


# What the host gets for a call: the backend's result (as bytes, when it came by the fast lane
# untouched), the task it became, or (a 2026-07-28 host) a round of its questions; and for a task
# it asks about: its result, or the task still working.
CallAnswer = types.CallToolResult | Passed | ProxyTask | InputRound
TaskAnswer = types.CallToolResult | Passed | WorkingTask


def outcome(row: TaskRow) -> types.CallToolResult | TaskJson:
    """A finished task's result as the backend sent it; a failure as our error; else the task."""
    status = TaskStatus(row["status"])
    if status == TaskStatus.COMPLETED:
        assert row["result"] is not None, row  # a completed task always keeps its result
        try:
            return types.CallToolResult.model_validate_json(row["result"])
        except ValueError as exc:  # pydantic's ValidationError is one: a damaged row
            raise UnreadableRow(f"result of task {row['task_id']}", exc) from exc
    if status in FINISHED_TASK:
        resumable = status == TaskStatus.INTERRUPTED and row.get("resume_token")
        raise TaskEnded(
            f"Task {row['task_id']} ({row['server']}.{row['tool']}) {status.value}: "
            f"{row.get('error') or 'no reason recorded'}",
            status,
            **(resumable_hints(row["task_id"]) if resumable else ended_hints(status, row["server"])),
        )
    return task_json(row)


RESUMABLE_HINT = (
    "It can go on from where it stopped: call execute_tool with the same server, tool and args and "
    "the task's resume_token (get_task shows it)."
)


class TaskEnded(EmceepeeError):
    """The task ended without a result; `status` says how (and the CLI's exit code with it)."""

    def __init__(
        self, message: str, status: TaskStatus, hint: str | None = None, *, cli_hint: str | None = None
    ):
        super().__init__(message, hint, cli_hint=cli_hint)
        self.status = status


def resumable_hints(task_id: str) -> Hints:
    return Hints(
        hint=RESUMABLE_HINT,
        cli_hint=f"A host's model can go on from where it stopped with the task's resume token "
        f"(emceepee tasks show {task_id} shows it).",
    )


def ended_hints(status: TaskStatus, server: str) -> Hints:
    """What to do about a task that ended without a result, for each surface."""
    if status == TaskStatus.FAILED:
        return hints("Check the backend ({}, {}), then call the tool again.", SERVERS_STEP, logs_step(server))
    said = {
        TaskStatus.CANCELLED: "It was cancelled on request; call the tool again if you still need it.",
        TaskStatus.EXPIRED: "It ran past its TTL; call the tool again, or raise task_ttl_ms in the config.",
        TaskStatus.INTERRUPTED: "Call the tool again; the result of the lost call is unknown.",
    }[status]
    return Hints(hint=said, cli_hint=said)
