"""Tool calls and the tasks they become when they are slow.

Lifecycle of one `execute_tool` call (`calls.CallState`, moved only by `Call.move`): it starts
`running` in serve's task group (not in the request handler, so neither an upstream timeout nor
a promotion can cancel it), under its own cancel scope. The handler waits up to `timeout_ms`
(clamped to `max_wait_ms`). Done in time: `answered`, the backend's result goes back and no task
ever existed. Not done, or blocked on a question: `promoted` — a `working` task row is journaled
and the handler answers with it — and the call goes on; when it ends (`finished`) its end is
written to the journal (`completed | failed | cancelled | expired | interrupted`) and announced as
an event. Every wait on the journal inside a shield is bounded (`JOURNAL_WAIT_S`).

`timeout_ms` never becomes a request timeout on the backend call: that would cancel it, and
any question it is waiting on.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession

from emceepee_cli.config import Defaults
from emceepee_cli.core import backend_tasks, lifetime, sagas, urlauth
from emceepee_cli.core.answers import already_answered, step_answer
from emceepee_cli.core.backend import Backend
from emceepee_cli.core.calls import (
    Call,
    CallState,
    Relay,
    final_row,
    journal_warning,
    outcome,
    task_row,
)
from emceepee_cli.core.events import Events
from emceepee_cli.core.failures import describe
from emceepee_cli.core.questions import Questions
from emceepee_cli.core.recorder import JOURNAL_WAIT_S, Recorder
from emceepee_cli.core.rounds import Round, Rounds
from emceepee_cli.core.runtime import Runtime
from emceepee_cli.errors import BackendError, EmceepeeError, NotFound, UsageError
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.journal import TASKS_LISTED, Journal
from emceepee_cli.store.pages import TaskFilter, clamp_limit
from emceepee_cli.store.records import TaskJson, TaskRow, TaskStatus, task_json

CANCEL_WAIT_S = 5.0

log = logging.getLogger(__name__)

Outcome = types.CallToolResult | dict[str, Any]  # the backend's result, or the task it became
Check = Callable[[], Awaitable[None]]  # what is checked once the backend is up (the tool, its arguments)


class Tasks:
    def __init__(
        self,
        journal: AsyncJournal,
        events: Events,
        questions: Questions,
        runtime: Runtime,
        defaults: Defaults,
        instance_id: str,
        *,
        backends: Callable[[str], Backend | None],
        install_key: bytes,
    ) -> None:
        self.journal = journal
        self.events = events
        self.questions = questions
        self.runtime = runtime
        self.defaults = defaults
        self.instance_id = instance_id
        self.backends = backends
        self.install_key = install_key
        self.rounds = Rounds(journal, questions, runtime)
        self.recorder = Recorder(journal, events, runtime, instance_id)
        self.calls: dict[str, Call] = {}
        self.stopping: str | None = None  # why emceepee is stopping, once it is

    def __repr__(self) -> str:
        return f"<Tasks in_flight={len(self.calls)}>"

    # ---- execute_tool --------------------------------------------------------------------

    async def execute(
        self,
        backend: Backend,
        tool: str,
        args: dict[str, Any] | None,
        timeout_ms: int | None,
        relay: Relay | None,
        check: Check | None = None,
    ) -> Outcome:
        """The call, in serve's task group. With `check`, the backend is still starting: the call
        first waits for it (as part of the call, so past `timeout_ms` it is a task), then runs
        `check`, then calls the tool."""
        call = Call(backend.name, tool, args, ttl_s=self.defaults.task_ttl_ms / 1000)
        call.awaiting_backend = check is not None
        self.calls[call.call_id] = call
        self.runtime.spawn(self._run, call, backend, None, check, name=f"call {call.call_id}")
        wait_ms = self.defaults.timeout_ms if timeout_ms is None else timeout_ms
        try:
            await self.wait(call, min(wait_ms, self.defaults.max_wait_ms) / 1000, relay)
        except anyio.get_cancelled_exc_class():
            if not call.ended:  # the host gave up on this call: so do we, as a direct call would
                call.stop_as = TaskStatus.CANCELLED
                call.scope.cancel()
                if self.stopping is None:  # not emceepee's own stop: the host's limit, or its cancel
                    lifetime.host_gave_up(call, self.events)
            raise
        if call.state == CallState.ANSWERED:
            if call.error is not None:
                raise call.error
            assert call.result is not None
            return call.result
        await self.recorder.promote(call)
        self.events.emit("task_created", call.server, {"task_id": call.call_id, "tool": call.tool})
        saga = self.saga(call.call_id)  # its questions whole, once: the rest of the reply reminds
        return {
            "proxy_task": await self.get_json(call.call_id),
            "pending_on_server": await self.pending_on_server(call.server),
            **saga,
            **journal_warning(call),
        }

    async def wait(self, call: Call, timeout_s: float, relay: Relay | None) -> None:
        """Wait (bounded) until the call ends or is suspended on a question for the client.

        Meanwhile its progress (or a heartbeat) is relayed to the host, if the host asked.
        """
        wake = call.wake
        if call.ended:
            return
        if self.suspended(call):
            await self.questions.sync()  # an answer another process wrote may not be noticed yet
            if self.suspended(call):
                return
        call.relay = relay
        try:
            with anyio.move_on_after(timeout_s):
                if relay is None:
                    await wake.wait()
                    return
                async with anyio.create_task_group() as tg:
                    tg.start_soon(relay.heartbeat, f"{call.server}.{call.tool}")
                    await wake.wait()
                    tg.cancel_scope.cancel()
        finally:
            if call.relay is relay:
                call.relay = None

    def suspended(self, call: Call) -> bool:
        return bool(self.questions.listed(task_id=call.call_id))

    def question_arrived(self, server: str, task_id: str | None) -> None:
        """Wake whoever waits on the call(s) a new question may block, so the model hears of it now."""
        for call in self.in_flight(server):
            if task_id is None or call.call_id == task_id:
                call.nudge()

    def in_flight(self, server: str) -> list[Call]:
        """The calls on `server` now (not those still waiting for it to start)."""
        return [
            c for c in self.calls.values() if c.server == server and not c.ended and not c.awaiting_backend
        ]

    # ---- the call itself -----------------------------------------------------------------

    async def _run(
        self, call: Call, backend: Backend, resume: Round | None, check: Check | None = None
    ) -> None:
        """The call itself, under its own cancel scope; however it ends, `_end` records how."""
        try:
            with call.scope:
                try:
                    if check is not None:
                        await self._started(call, backend)
                        await check()
                    call.result = await self._drive(call, backend, resume)
                except urlauth.UrlElicitationRequired as exc:
                    call.error = await urlauth.park(self.questions, call.server, call.tool, exc)
                except EmceepeeError as exc:
                    call.error = exc
                except Exception as exc:
                    log.exception(
                        "call %s (%s.%s) failed inside emceepee", call.call_id, call.server, call.tool
                    )
                    call.error = BackendError(
                        f"The call to {call.server}.{call.tool} failed inside emceepee: {describe(exc)}",
                        hint="This is a bug in emceepee; its stderr log has the traceback. "
                        "Call the tool again.",
                    )
        finally:
            if call.result is None and call.error is None:
                # Cancelled: by us (cancel_task, TTL) with a reason, else emceepee itself is stopping.
                if call.stop_as is None and not call.scope.cancel_called:
                    call.stop_as = TaskStatus.INTERRUPTED
                status = call.stop_as or TaskStatus.CANCELLED
                ended = "expired" if status == TaskStatus.EXPIRED else f"was {status.value}"
                waiting = (
                    f" while backend '{call.server}' was still starting" if call.awaiting_backend else ""
                )
                call.error = BackendError(f"The call to {call.server}.{call.tool} {ended}{waiting}.")
            if call.result is None and self.stopping is not None:
                # emceepee stopped the backend itself: whatever the call ended with, that is why.
                call.stop_as = TaskStatus.INTERRUPTED
                call.error = BackendError(
                    f"emceepee serve stopped ({self.stopping}) while the call to {call.server}.{call.tool}"
                    " was running; the backend was stopped with it."
                )
            with anyio.CancelScope(shield=True):
                await self._end(call)

    async def _end(self, call: Call) -> None:
        """Wake the waiters, journal the end of a promoted call (bounded), and forget it."""
        if call.end() == CallState.FINISHED:
            await self.recorder.finished(call)
        self.calls.pop(call.call_id, None)
        call.settled.set()

    async def _started(self, call: Call, backend: Backend) -> None:
        """Wait for the backend to start (the task TTL ends the wait), or fail with why it did not."""
        await backend.wait_ready(self.defaults.task_ttl_max_ms / 1000)
        backend.require_session()  # its start failed: the error has the exit code and stderr tail
        call.awaiting_backend = False
        if call.promoted:
            with anyio.move_on_after(JOURNAL_WAIT_S):
                await call.row_written.wait()
            message = f"backend '{call.server}' started; the tool is running"
            await self.runtime.guarded(
                lambda: self.journal.run(Journal.set_status_message, call.call_id, message)
            )

    async def _drive(self, call: Call, backend: Backend, resume: Round | None) -> types.CallToolResult:
        """Call the tool; for a 2026-07-28 backend, answer its input rounds until it returns a result."""
        state: str | None = None
        responses: types.InputResponses | None = None
        number = 0
        if resume is not None:  # adopted after a restart: its last round's answers first, then call again
            state, number = resume.request_state, resume.number
            responses = await self.rounds.collect(resume.asked)
            await backend.wait_ready(self.defaults.max_wait_ms / 1000)
        while True:
            send = functools.partial(self._call_tool, call, responses, state)
            result = await backend.request(f"tools/call '{call.tool}'", send)
            if isinstance(result, types.CallToolResult):
                return result
            if not isinstance(result, types.InputRequiredResult):
                raise BackendError(
                    f"Backend '{call.server}' answered tools/call '{call.tool}' with an unknown result type."
                )
            number += 1
            state = result.request_state
            if not result.input_requests:  # "poll again"
                await anyio.sleep(min(0.05 * number, 0.25))
                responses = None
                continue
            responses = await self.rounds.answer(
                call, result.input_requests, state, number, self.recorder.promote
            )

    async def _call_tool(
        self, call: Call, responses: types.InputResponses | None, state: str | None, session: ClientSession
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One tools/call of this call: the first, or the next after a round of answers."""
        backend = self.backends(call.server)
        if backend is not None and backend_tasks.runs_as_task(backend, call.tool):
            progress = functools.partial(self.recorder.progress, call)
            return await backend_tasks.call(backend, session, call.tool, call.args, call.ttl_s, progress)
        return await session.call_tool(
            call.tool,
            call.args,
            progress_callback=functools.partial(self.recorder.progress, call),
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )

    # ---- the task tools ------------------------------------------------------------------

    def saga(self, task_id: str) -> dict[str, Any]:
        """A task blocked on questions, as a saga the model can resume; empty when it is not."""
        asked = self.questions.listed(task_id=task_id)
        self.questions.shown(q["request_id"] for q in asked)
        return sagas.view(self.install_key, task_id, asked)

    async def row(self, task_id: str) -> TaskRow:
        unjournaled = self.recorder.unjournaled
        known = [*(c.call_id for c in self.calls.values() if c.promoted), *unjournaled]
        resolved = await self.journal.run(Journal.resolve_task, task_id, known)
        row = await self.journal.run(Journal.task, resolved)
        if row is None and (call := self.calls.get(resolved)) is not None and call.promoted:
            return task_row(call, self.instance_id)  # not journaled; this process still knows it
        if row is None and (ended := unjournaled.get(resolved)) is not None:
            return final_row(ended, self.instance_id)
        if row is None:
            raise NotFound(f"No task '{task_id}'.", hint=TASKS_LISTED)
        return row

    async def get_json(self, task_id: str) -> TaskJson:
        return task_json(await self.row(task_id))

    async def pending_on_server(self, server: str) -> dict[str, Any]:
        rows = await self.journal.run(Journal.tasks, server=server, instance_id=self.instance_id)
        return {"server": server, "tasks": [task_json(r) for r in rows], **self.questions.for_server(server)}

    async def list_tasks(
        self,
        server: str | None,
        status: str | None,
        include_completed: bool,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """A page of tasks, newest first; `next_cursor` and `more` say what is left."""
        where = TaskFilter(server, status, include_completed)
        page = await self.journal.run(Journal.task_page, where, cursor, clamp_limit(limit))
        return {**page, "tasks": [task_json(r) for r in page["tasks"]]}

    async def result(self, task_id: str, timeout_ms: int | None, relay: Relay | None) -> Outcome:
        row = await self.row(task_id)
        call = self.calls.get(row["task_id"])
        if row["status"] == TaskStatus.WORKING and call is not None:
            max_wait = self.defaults.max_wait_ms
            await self.wait(call, min(max_wait if timeout_ms is None else timeout_ms, max_wait) / 1000, relay)
            if call.ended:
                with anyio.CancelScope(shield=True), anyio.move_on_after(JOURNAL_WAIT_S):
                    await call.settled.wait()
            row = await self.row(row["task_id"])
        out = outcome(row)
        return {**out, **self.saga(row["task_id"])} if isinstance(out, dict) else out

    async def resume(self, token: str, steps: list[dict[str, Any]], relay: Relay | None) -> Outcome:
        """Answer a suspended saga's steps, then wait (bounded) for its next suspension or its result."""
        claims = sagas.verify(self.install_key, token)
        sagas.check_steps(claims, steps)
        for step in steps:
            row = await self.questions.resolve(step["step_id"])
            if "error" in step and "result" not in step:
                error = str(step["error"])
                if not await self.questions.settle(row["request_id"], "rejected", error=error, by="model"):
                    raise already_answered(row)
            else:
                answer = step_answer(row["kind"], step.get("result"))
                await self.questions.answer(row["request_id"], answer, by="model")
        return await self.result(claims["t"], None, relay)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        row = await self.row(task_id)
        if row["status"] != TaskStatus.WORKING:
            raise UsageError(f"Task {row['task_id']} is already {row['status']}; there is nothing to cancel.")
        call = self.calls.get(row["task_id"])
        if call is None:  # another emceepee process owns it: ask it through the journal
            await self.journal.run(Journal.request_cancel, row["task_id"])
            return {
                "task": task_json(row),
                "cancel_requested": True,
                "message": "Another emceepee process owns this task; it was asked to cancel it.",
            }
        await self.stop(call, TaskStatus.CANCELLED)
        return {"task": await self.get_json(row["task_id"])}

    async def stop(self, call: Call, why: TaskStatus) -> None:
        """Cancel the backend call for real (the backend gets notifications/cancelled)."""
        call.stop_as = why
        call.scope.cancel()
        await self.questions.withdraw(call.call_id, f"its call was {why.value}")
        with anyio.move_on_after(CANCEL_WAIT_S):
            await call.settled.wait()

    def stop_all(self, why: str = "it was told to stop") -> None:
        """emceepee is stopping (`why`): every call still running ends as interrupted, and says so."""
        self.stopping = why
        for call in self.calls.values():
            call.stop_as = TaskStatus.INTERRUPTED

    def working(self) -> list[dict[str, Any]]:
        """Category 3, a snapshot: this process's calls still running, by server."""
        by_server: dict[str, list[dict[str, Any]]] = {}
        for call in self.calls.values():
            if call.state == CallState.PROMOTED:
                by_server.setdefault(call.server, []).append(
                    {"task_id": call.call_id, "tool": call.tool, "status": "working"}
                )
        return [{"server": server, "working_tasks": tasks} for server, tasks in by_server.items()]

    # ---- housekeeping (the watcher) ------------------------------------------------------

    def promoted(self) -> list[str]:
        """The ids of this process's calls that are tasks still running."""
        return [c.call_id for c in self.calls.values() if c.state == CallState.PROMOTED]

    async def expire_due(self) -> None:
        for call in [c for c in self.calls.values() if c.expired and not c.ended]:
            if not self._extend_for_question(call):
                await self.stop(call, TaskStatus.EXPIRED)

    def _extend_for_question(self, call: Call) -> bool:
        """A call that waits on a question outlives its TTL (see core/lifetime.py); True if it does."""
        expires_at = lifetime.extend_for_questions(
            call, self.questions.listed(server=call.server), self.defaults.task_ttl_max_ms / 1000
        )
        if expires_at is not None and call.promoted:
            self.runtime.write(self.journal, Journal.set_expiry, call.call_id, expires_at)
        return expires_at is not None

    async def cancel_requested(self) -> None:
        for task_id in await self.journal.run(Journal.cancel_requests, self.instance_id):
            call = self.calls.get(task_id)
            if call is not None:
                await self.stop(call, TaskStatus.CANCELLED)
            else:  # its call is gone (finished as we looked): settle the row anyway
                await self.journal.run(Journal.finish_task, task_id, TaskStatus.CANCELLED, error="cancelled")

    async def adopt(self, task_ids: list[str]) -> None:
        """Re-drive the suspended 2026-07-28 calls a dead emceepee left: answer their rounds, call again."""
        for task_id in task_ids:
            row = await self.journal.run(Journal.task, task_id)
            if row is None:
                continue
            call = Call(
                row["server"],
                row["tool"],
                json.loads(row["args"] or "null"),
                ttl_s=self.defaults.task_ttl_max_ms / 1000,
                call_id=task_id,
                created_at=row["created_at"],
                state=CallState.PROMOTED,
            )
            call.row_written.set()
            self.calls[task_id] = call
            self.runtime.spawn(self._redrive, call, row, name=f"redrive {task_id}")

    async def _redrive(self, call: Call, row: TaskRow) -> None:
        resume = await self.rounds.last_round(call.call_id, row["request_state"], int(row["round"] or 0))
        backend = self.backends(call.server)
        if backend is None:
            call.error = BackendError(
                f"Server '{call.server}' is no longer configured; task {call.call_id} cannot resume."
            )
            call.stop_as = TaskStatus.FAILED
            await self._end(call)
            return
        await self._run(call, backend, resume)
