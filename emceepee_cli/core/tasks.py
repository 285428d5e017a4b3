"""Tool calls and the tasks they become when they are slow.

Lifecycle of one `execute_tool` call: it starts in the hub's task group (not in the request
handler, so neither an upstream timeout nor a promotion can cancel it), under its own cancel
scope. The handler waits up to `timeout_ms` (clamped to `max_wait_ms`). Done in time: the
backend's result, and no task ever existed. Not done: the call is *promoted* — a `working` task
row is journaled and the handler answers with it — and the call goes on; its end is written to
the journal (`completed | failed | cancelled | expired`) and announced as an event.

`timeout_ms` never becomes a request timeout on the backend call: that would cancel it, and
any question it is waiting on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from emceepee_cli.errors import BackendError, EmceepeeError, NotFound, UsageError
from emceepee_cli.ids import new_id, resolve_prefix
from emceepee_cli.store.journal import now_iso
from emceepee_cli.store.records import FINISHED_TASK, TaskStatus, task_json

if TYPE_CHECKING:
    from emceepee_cli.core.backend import Backend
    from emceepee_cli.core.hub import Hub

HEARTBEAT_S = 10.0  # while a host waits with a progressToken, it hears from us at least this often
PROGRESS_WRITE_S = 1.0  # journal a task's progress at most this often
PROGRESS_EVENT_S = 5.0  # and announce it as an event at most this often
CANCEL_WAIT_S = 5.0

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


class Relay:
    """Progress for one waiting upstream request; values only ever increase, as MCP requires."""

    def __init__(self, send: ProgressFn) -> None:
        self._send = send
        self.last = 0.0
        self.sent_at = time.monotonic()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.last = max(progress, self.last + 1e-6)
        self.sent_at = time.monotonic()
        await self._send(self.last, total, message)

    async def heartbeat(self, what: str) -> None:
        started = time.monotonic()
        while True:
            await anyio.sleep(max(0.0, self.sent_at + HEARTBEAT_S - time.monotonic()))
            if time.monotonic() - self.sent_at >= HEARTBEAT_S:
                await self(self.last, None, f"still waiting for {what} ({time.monotonic() - started:.0f} s)")


@dataclass(eq=False)
class Call:
    """One backend tool call in flight, promoted or not."""

    server: str
    tool: str
    args: dict[str, Any] | None
    ttl_s: float
    call_id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=now_iso)
    started: float = field(default_factory=time.monotonic)
    done: anyio.Event = field(default_factory=anyio.Event)
    inserted: anyio.Event = field(default_factory=anyio.Event)  # its task row exists
    settled: anyio.Event = field(default_factory=anyio.Event)  # its end is journaled (if promoted)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    result: types.CallToolResult | None = None
    error: EmceepeeError | None = None
    promoted: bool = False
    stop_as: TaskStatus | None = None  # why we cancelled it: cancelled or expired
    relay: Relay | None = None
    progress: dict[str, Any] | None = None
    progress_written: float = 0.0
    progress_announced: float = field(default_factory=time.monotonic)  # first summary after PROGRESS_EVENT_S

    def __repr__(self) -> str:
        state = "done" if self.done.is_set() else "running"
        return f"<Call {self.call_id} {self.server}.{self.tool} {state} promoted={self.promoted}>"

    @property
    def expired(self) -> bool:
        return time.monotonic() - self.started > self.ttl_s


class Tasks:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.calls: dict[str, Call] = {}

    def __repr__(self) -> str:
        return f"<Tasks in_flight={len(self.calls)}>"

    # ---- execute_tool --------------------------------------------------------------------

    async def execute(self, backend: Backend, tool: str, args: dict[str, Any] | None, timeout_ms: int | None,
                      relay: Relay | None) -> types.CallToolResult | dict[str, Any]:  # fmt: skip
        defaults = self.hub.config.defaults
        call = Call(backend.name, tool, args, ttl_s=defaults.task_ttl_ms / 1000)
        self.calls[call.call_id] = call
        self.hub.task_group.start_soon(self._run, call, backend, name=f"call {call.call_id}")
        wait_ms = defaults.timeout_ms if timeout_ms is None else timeout_ms
        try:
            await self.wait(call, min(wait_ms, defaults.max_wait_ms) / 1000, relay)
        except anyio.get_cancelled_exc_class():
            if not call.done.is_set():  # the host gave up on this call: so do we, as a direct call would
                call.stop_as = TaskStatus.CANCELLED
                call.scope.cancel()
            raise
        if call.done.is_set():
            if call.error is not None:
                raise call.error
            assert call.result is not None
            return call.result
        return await self._promote(call)

    async def wait(self, call: Call, timeout_s: float, relay: Relay | None) -> None:
        """Wait (bounded) for the call to end, relaying its progress (or heartbeats) meanwhile."""
        call.relay = relay
        try:
            with anyio.move_on_after(timeout_s):
                async with anyio.create_task_group() as tg:
                    if relay is not None:
                        tg.start_soon(relay.heartbeat, f"{call.server}.{call.tool}")
                    await call.done.wait()
                    tg.cancel_scope.cancel()
        finally:
            if call.relay is relay:
                call.relay = None

    async def _run(self, call: Call, backend: Backend) -> None:
        with call.scope:
            try:
                call.result = await backend.request(
                    f"tools/call '{call.tool}'",
                    lambda s: s.call_tool(call.tool, call.args, progress_callback=lambda p, t, m: self._progress(call, p, t, m)),
                )
            except EmceepeeError as exc:
                call.error = exc
        if call.scope.cancelled_caught and call.result is None and call.error is None:
            status = call.stop_as or TaskStatus.CANCELLED
            call.error = BackendError(f"The call to {call.server}.{call.tool} was {status.value}.")
        call.done.set()
        with anyio.CancelScope(shield=True):
            if call.promoted:
                await call.inserted.wait()
                await self._finish(call)
        self.calls.pop(call.call_id, None)
        call.settled.set()

    async def _finish(self, call: Call) -> None:
        if call.result is not None:
            status, error = TaskStatus.COMPLETED, None
            result = call.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            status, error, result = call.stop_as or TaskStatus.FAILED, call.error.message if call.error else None, None
        if await self.hub.journal.finish_task(call.call_id, status, result=result, error=error):
            self.hub.events.emit("task_status", call.server, {"task_id": call.call_id, "tool": call.tool,
                                                                "status": status.value, **({"error": error} if error else {})})  # fmt: skip

    async def _progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        call.progress = {"progress": progress, **({"total": total} if total is not None else {}),
                         **({"message": message} if message else {})}  # fmt: skip
        if call.relay is not None:
            await call.relay(progress, total, message)
        now = time.monotonic()
        if call.promoted and call.inserted.is_set() and now - call.progress_written >= PROGRESS_WRITE_S:
            call.progress_written = now
            await self.hub.journal.update_progress(call.call_id, call.progress, message)
            if now - call.progress_announced >= PROGRESS_EVENT_S:
                call.progress_announced = now
                self.hub.events.emit("task_progress", call.server, {"task_id": call.call_id, **call.progress})

    async def _promote(self, call: Call) -> dict[str, Any]:
        call.promoted = True
        row = {"task_id": call.call_id, "instance_id": self.hub.instance_id, "server": call.server, "tool": call.tool,
               "args": call.args, "status": TaskStatus.WORKING.value, "created_at": call.created_at,
               "last_updated_at": now_iso(), "expires_at": now_iso(call.ttl_s - (time.monotonic() - call.started))}  # fmt: skip
        if call.progress:
            row["progress"] = json.dumps(call.progress)
        with anyio.CancelScope(shield=True):
            await self.hub.journal.insert_task(row)
            call.inserted.set()
        self.hub.events.emit("task_created", call.server, {"task_id": call.call_id, "tool": call.tool})
        return {"proxy_task": await self.get_json(call.call_id), "pending_on_server": await self.pending_on_server(call.server)}

    # ---- the task tools ------------------------------------------------------------------

    async def resolve(self, task_id: str) -> str:
        if len(task_id) == 26:
            return task_id.upper()
        return resolve_prefix(task_id, await self.hub.journal.task_ids(), "task",
                              "list_tasks(include_completed=true) shows the known tasks.")  # fmt: skip

    async def row(self, task_id: str) -> dict[str, Any]:
        row = await self.hub.journal.task(await self.resolve(task_id))
        if row is None:
            raise NotFound(f"No task '{task_id}'.", hint="list_tasks(include_completed=true) shows the known tasks.")
        return row

    async def get_json(self, task_id: str) -> dict[str, Any]:
        return task_json(await self.row(task_id))

    async def pending_on_server(self, server: str) -> dict[str, Any]:
        rows = await self.hub.journal.tasks(server=server, instance_id=self.hub.instance_id)
        return {"server": server, "tasks": [task_json(r) for r in rows], **self.hub.pending_for_server(server)}

    async def list(self, server: str | None, status: str | None, include_completed: bool) -> dict[str, Any]:
        rows = await self.hub.journal.tasks(server=server, status=status, include_finished=include_completed)
        return {"tasks": [task_json(r) for r in rows]}

    async def result(self, task_id: str, timeout_ms: int | None, relay: Relay | None) -> types.CallToolResult | dict[str, Any]:
        row = await self.row(task_id)
        call = self.calls.get(row["task_id"])
        if row["status"] == TaskStatus.WORKING and call is not None:
            max_wait = self.hub.config.defaults.max_wait_ms
            await self.wait(call, min(max_wait if timeout_ms is None else timeout_ms, max_wait) / 1000, relay)
            if call.done.is_set():
                with anyio.CancelScope(shield=True):
                    await call.settled.wait()
            row = await self.row(row["task_id"])
        return outcome(row)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        row = await self.row(task_id)
        if row["status"] != TaskStatus.WORKING:
            raise UsageError(f"Task {row['task_id']} is already {row['status']}; there is nothing to cancel.")
        call = self.calls.get(row["task_id"])
        if call is None:  # another emceepee process owns it: ask it through the journal
            await self.hub.journal.request_cancel(row["task_id"])
            return {"task": task_json(row), "cancel_requested": True,
                    "message": "Another emceepee process owns this task; it was asked to cancel it."}  # fmt: skip
        await self.stop(call, TaskStatus.CANCELLED)
        return {"task": await self.get_json(row["task_id"])}

    async def stop(self, call: Call, why: TaskStatus) -> None:
        """Cancel the backend call for real (the backend gets notifications/cancelled)."""
        call.stop_as = why
        call.scope.cancel()
        with anyio.move_on_after(CANCEL_WAIT_S):
            await call.done.wait()
            await call.settled.wait()

    # ---- housekeeping (called by the hub's watcher) ------------------------------------

    async def expire_due(self) -> None:
        for call in [c for c in self.calls.values() if c.expired and not c.done.is_set()]:
            await self.stop(call, TaskStatus.EXPIRED)

    async def cancel_requested(self) -> None:
        for task_id in await self.hub.journal.cancel_requests(self.hub.instance_id):
            call = self.calls.get(task_id)
            if call is not None:
                await self.stop(call, TaskStatus.CANCELLED)
            else:  # its call is gone (finished as we looked): settle the row anyway
                await self.hub.journal.finish_task(task_id, TaskStatus.CANCELLED, error="cancelled")

    def working(self) -> list[dict[str, Any]]:
        """Category 3, a snapshot: this process's calls still running, by server."""
        by_server: dict[str, list[dict[str, Any]]] = {}
        for call in self.calls.values():
            if call.promoted and not call.done.is_set():
                by_server.setdefault(call.server, []).append({"task_id": call.call_id, "tool": call.tool, "status": "working"})
        return [{"server": server, "working_tasks": tasks} for server, tasks in by_server.items()]


def outcome(row: dict[str, Any]) -> types.CallToolResult | dict[str, Any]:
    """A finished task's result as the backend sent it; a failure as our error; else the task."""
    status = TaskStatus(row["status"])
    if status == TaskStatus.COMPLETED:
        return types.CallToolResult.model_validate_json(row["result"])
    if status in FINISHED_TASK:
        raise TaskEnded(f"Task {row['task_id']} ({row['server']}.{row['tool']}) {status.value}: {row.get('error') or 'no reason recorded'}",
                        hint=_ENDED_HINT[status])  # fmt: skip
    return {"task": task_json(row)}


class TaskEnded(EmceepeeError):
    """The task ended without a result."""


_ENDED_HINT = {
    TaskStatus.FAILED: "Check list_servers and get_logs for the backend, then call the tool again.",
    TaskStatus.CANCELLED: "It was cancelled on request; call the tool again if you still need it.",
    TaskStatus.EXPIRED: "It ran past its TTL; call the tool again, or raise task_ttl_ms in the config.",
    TaskStatus.INTERRUPTED: "Call the tool again; the result of the lost call is unknown.",
}
