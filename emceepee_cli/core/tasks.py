"""Tool calls and the tasks they become when they are slow.

Lifecycle of one `execute_tool` call (`calls.CallState`, moved only by `Call.move`): it starts
`running` in the hub's task group (not in the request handler, so neither an upstream timeout nor
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

import json
import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from emceepee_cli.clock import now_iso
from emceepee_cli.core import sagas
from emceepee_cli.core.answers import already_answered, backend_reply, step_answer
from emceepee_cli.core.backend import describe
from emceepee_cli.core.calls import KINDS, Call, CallState, Relay, Round, outcome
from emceepee_cli.errors import BackendError, EmceepeeError, NotFound, UsageError
from emceepee_cli.store.journal import TASKS_LISTED, Journal
from emceepee_cli.store.records import TaskJson, TaskRow, TaskStatus, task_json

if TYPE_CHECKING:
    from emceepee_cli.core.backend import Backend
    from emceepee_cli.core.hub import Hub

PROGRESS_WRITE_S = 1.0  # journal a task's progress at most this often
PROGRESS_EVENT_S = 5.0  # and announce it as an event at most this often
CANCEL_WAIT_S = 5.0
UNJOURNALED_KEPT = 100
JOURNAL_WAIT_S = 10.0  # a journal write waits at most its busy timeout (5 s); this covers it

log = logging.getLogger(__name__)


class Tasks:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.calls: dict[str, Call] = {}
        self.unjournaled: dict[str, Call] = {}  # ended calls whose end the journal could not take

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
    ) -> types.CallToolResult | dict[str, Any]:
        defaults = self.hub.config.defaults
        call = Call(backend.name, tool, args, ttl_s=defaults.task_ttl_ms / 1000)
        self.calls[call.call_id] = call
        self.hub.spawn(self._run, call, backend, name=f"call {call.call_id}")
        wait_ms = defaults.timeout_ms if timeout_ms is None else timeout_ms
        try:
            await self.wait(call, min(wait_ms, defaults.max_wait_ms) / 1000, relay)
        except anyio.get_cancelled_exc_class():
            if not call.ended:  # the host gave up on this call: so do we, as a direct call would
                call.stop_as = TaskStatus.CANCELLED
                call.scope.cancel()
            raise
        if call.state == CallState.ANSWERED:
            if call.error is not None:
                raise call.error
            assert call.result is not None
            return call.result
        await self.promote(call)
        self.hub.events.emit("task_created", call.server, {"task_id": call.call_id, "tool": call.tool})
        return {
            "proxy_task": await self.get_json(call.call_id),
            "pending_on_server": await self.pending_on_server(call.server),
            **self.saga(call.call_id),
            **_journal_warning(call),
        }

    async def wait(self, call: Call, timeout_s: float, relay: Relay | None) -> None:
        """Wait (bounded) until the call ends or is suspended on a question for the client.

        Meanwhile its progress (or a heartbeat) is relayed to the host, if the host asked.
        """
        wake = call.wake
        if call.ended:
            return
        if self.suspended(call):
            await self.hub.questions.sync()  # an answer another process wrote may not be noticed yet
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
        return bool(self.hub.questions.listed(task_id=call.call_id))

    def question_arrived(self, server: str, task_id: str | None) -> None:
        """Wake whoever waits on the call(s) a new question may block, so the model hears of it now."""
        for call in self.in_flight(server):
            if task_id is None or call.call_id == task_id:
                call.nudge()

    def in_flight(self, server: str) -> list[Call]:
        return [c for c in self.calls.values() if c.server == server and not c.ended]

    async def _run(self, call: Call, backend: Backend, resume: Round | None = None) -> None:
        """The call itself, under its own cancel scope; however it ends, `_end` records how."""
        try:
            with call.scope:
                try:
                    call.result = await self._drive(call, backend, resume)
                except EmceepeeError as exc:
                    call.error = exc
                except Exception as exc:
                    log.exception(
                        "call %s (%s.%s) failed inside emceepee", call.call_id, call.server, call.tool
                    )
                    call.error = BackendError(
                        f"The call to {call.server}.{call.tool} failed inside emceepee: {describe(exc)}",
                        hint="This is a bug in emceepee; its stderr log has the traceback. Call the tool again.",
                    )
        finally:
            if call.result is None and call.error is None:
                # Cancelled: by us (cancel_task, TTL) with a reason, else emceepee itself is stopping.
                if call.stop_as is None and not call.scope.cancel_called:
                    call.stop_as = TaskStatus.INTERRUPTED
                status = call.stop_as or TaskStatus.CANCELLED
                call.error = BackendError(f"The call to {call.server}.{call.tool} was {status.value}.")
            with anyio.CancelScope(shield=True):
                await self._end(call)

    async def _end(self, call: Call) -> None:
        """Wake the waiters, journal the end of a promoted call (bounded), and forget it."""
        if call.end() == CallState.FINISHED:
            with anyio.move_on_after(JOURNAL_WAIT_S):
                await call.row_written.wait()
            await self.hub.guarded(lambda: self._finish(call))
        self.calls.pop(call.call_id, None)
        call.settled.set()

    async def _drive(self, call: Call, backend: Backend, resume: Round | None) -> types.CallToolResult:
        """Call the tool; for a 2026-07-28 backend, answer its input rounds until it returns a result."""
        state, responses, round_ = None, None, 0
        if resume is not None:  # adopted after a restart: its last round's answers first, then call again
            state, round_ = resume.request_state, resume.number
            responses = await self._collect(resume.asked)
            await backend.wait_ready(self.hub.config.defaults.max_wait_ms / 1000)
        while True:
            result = await backend.request(
                f"tools/call '{call.tool}'",
                lambda s, responses=responses, state=state: s.call_tool(
                    call.tool,
                    call.args,
                    progress_callback=lambda p, t, m: self._progress(call, p, t, m),
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                ),
            )
            if isinstance(result, types.CallToolResult):
                return result
            if not isinstance(result, types.InputRequiredResult):
                raise BackendError(
                    f"Backend '{call.server}' answered tools/call '{call.tool}' with an unknown result type."
                )
            round_ += 1
            state = result.request_state
            if not result.input_requests:  # "poll again"
                await anyio.sleep(min(0.05 * round_, 0.25))
                responses = None
                continue
            responses = await self._answer_round(call, result.input_requests, state, round_)

    async def _answer_round(
        self, call: Call, requests: dict[str, Any], state: str | None, round_: int
    ) -> dict[str, Any]:
        """Journal the round, park its questions (exactly correlated), and collect the answers."""
        asked: dict[str, Any] = {}
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            kind = KINDS.get(type(request))
            if kind is None:  # roots: emceepee exposes none
                responses[key] = types.ListRootsResult(roots=[])
                continue
            params = request.params.model_dump(mode="json", exclude_none=True)
            asked[key] = await self.hub.questions.ask(
                call.server,
                kind,
                params,
                task_id=call.call_id,
                correlation="exact",
                input_key=key,
                round_=round_,
            )
        await self.promote(call)  # its state is journaled with its task row, so the task must exist
        with anyio.CancelScope(shield=True):
            await self.hub.guarded(
                lambda: self.hub.journal.run(Journal.set_round, call.call_id, state, round_)
            )
        return responses | await self._collect(asked)

    async def _collect(self, asked: dict[str, Any]) -> dict[str, Any]:
        responses: dict[str, Any] = {}
        for key, question in asked.items():
            row = await self.hub.questions.wait(question)
            reply = backend_reply(row)
            if isinstance(reply, types.ErrorData):
                raise BackendError(
                    f"The question {row['request_id']} for this call was {row['status']}: {row.get('error')}"
                )
            responses[key] = reply
        return responses

    async def _finish(self, call: Call) -> None:
        if call.result is not None:
            status, error = TaskStatus.COMPLETED, None
            result = call.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            status, result = call.stop_as or TaskStatus.FAILED, None
            error = call.error.message if call.error else None
        journal = self.hub.journal
        try:
            ended = await journal.run(Journal.finish_task, call.call_id, status, result=result, error=error)
            if not ended and await journal.run(Journal.task, call.call_id) is None:
                # Its promotion could not be journaled: write it now, ended, so the result is kept.
                await journal.run(Journal.insert_task, self._final_row(call))
                ended = True
        except EmceepeeError as exc:
            # The journal cannot take it: keep the outcome in memory, so this process can still
            # hand it over (a restart would lose it, and the model was told so at promotion).
            call.unjournaled = exc
            self.unjournaled[call.call_id] = call
            while len(self.unjournaled) > UNJOURNALED_KEPT:
                self.unjournaled.pop(next(iter(self.unjournaled)))
            self.hub.journal_failed(exc)
            ended = True
        if ended:
            data = {"task_id": call.call_id, "tool": call.tool, "status": status.value}
            self.hub.events.emit("task_status", call.server, {**data, **({"error": error} if error else {})})

    async def _progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        call.progress = {
            "progress": progress,
            **({"total": total} if total is not None else {}),
            **({"message": message} if message else {}),
        }
        if call.relay is not None:
            await call.relay(progress, total, message)
        now = time.monotonic()
        written = call.state == CallState.PROMOTED and call.row_written.is_set()
        if written and now - call.progress_written >= PROGRESS_WRITE_S:
            call.progress_written = now
            progress = call.progress
            await self.hub.guarded(
                lambda: self.hub.journal.run(Journal.update_progress, call.call_id, progress, message)
            )
            if now - call.progress_announced >= PROGRESS_EVENT_S:
                call.progress_announced = now
                self.hub.events.emit("task_progress", call.server, {"task_id": call.call_id, **call.progress})

    async def promote(self, call: Call) -> None:
        """Make the call a task by journaling its working row.

        Idempotent, and used from both sides: the host's waiter (timeout, or a question for the
        client) and the call itself (a 2026-07-28 round, whose state needs the row). Whoever moves
        the call writes the row; anyone else waits for that write, bounded.
        """
        if call.move(CallState.PROMOTED):
            with anyio.CancelScope(shield=True):
                try:
                    await self.hub.journal.run(Journal.insert_task, self._task_row(call))
                except EmceepeeError as exc:  # the call runs on; this process keeps its task in memory
                    call.unjournaled = exc
                    self.hub.journal_failed(exc)
                finally:
                    call.row_written.set()  # even if the write failed: nobody may wait on it forever
        elif call.state == CallState.PROMOTED:
            with anyio.move_on_after(JOURNAL_WAIT_S):
                await call.row_written.wait()

    def _final_row(self, call: Call) -> TaskRow:
        """The task row of a promoted call that has ended, as journaled (or kept in memory)."""
        row = self._task_row(call)
        if call.result is not None:
            row["status"] = TaskStatus.COMPLETED.value
            row["result"] = call.result.model_dump_json(by_alias=True, exclude_none=True)
        else:
            row["status"] = (call.stop_as or TaskStatus.FAILED).value
            row["error"] = call.error.message if call.error else None
        row["finished_at"] = now_iso()
        return row

    def _task_row(self, call: Call) -> TaskRow:
        """The task row of a promoted call, as journaled (and as shown if journaling failed)."""
        return TaskRow(
            task_id=call.call_id,
            instance_id=self.hub.instance_id,
            server=call.server,
            tool=call.tool,
            args=json.dumps(call.args),
            status=TaskStatus.WORKING.value,
            status_message=None,
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

    def saga(self, task_id: str) -> dict[str, Any]:
        """A task blocked on questions, as a saga the model can resume; empty when it is not."""
        steps = [
            {"type": q["kind"], "step_id": q["request_id"], "params": q}
            for q in self.hub.questions.listed(task_id=task_id)
        ]
        if not steps:
            return {}
        token = sagas.sign(self.hub.install_key, task_id, [step["step_id"] for step in steps])
        return {"saga": {"state": "suspended", "saga_token": token, "steps": steps}}

    # ---- the task tools ------------------------------------------------------------------

    async def row(self, task_id: str) -> TaskRow:
        known = [*(c.call_id for c in self.calls.values() if c.promoted), *self.unjournaled]
        resolved = await self.hub.journal.run(Journal.resolve_task, task_id, known)
        row = await self.hub.journal.run(Journal.task, resolved)
        if row is None and (call := self.calls.get(resolved)) is not None and call.promoted:
            return self._task_row(call)  # its row could not be journaled; this process still knows it
        if row is None and (ended := self.unjournaled.get(resolved)) is not None:
            return self._final_row(ended)
        if row is None:
            raise NotFound(f"No task '{task_id}'.", hint=TASKS_LISTED)
        return row

    async def get_json(self, task_id: str) -> TaskJson:
        return task_json(await self.row(task_id))

    async def pending_on_server(self, server: str) -> dict[str, Any]:
        rows = await self.hub.journal.run(Journal.tasks, server=server, instance_id=self.hub.instance_id)
        return {
            "server": server,
            "tasks": [task_json(r) for r in rows],
            **self.hub.questions.for_server(server),
        }

    async def list_tasks(
        self, server: str | None, status: str | None, include_completed: bool
    ) -> dict[str, Any]:
        rows = await self.hub.journal.run(
            Journal.tasks, server=server, status=status, include_finished=include_completed
        )
        return {"tasks": [task_json(r) for r in rows]}

    async def result(
        self, task_id: str, timeout_ms: int | None, relay: Relay | None
    ) -> types.CallToolResult | dict[str, Any]:
        row = await self.row(task_id)
        call = self.calls.get(row["task_id"])
        if row["status"] == TaskStatus.WORKING and call is not None:
            max_wait = self.hub.config.defaults.max_wait_ms
            await self.wait(call, min(max_wait if timeout_ms is None else timeout_ms, max_wait) / 1000, relay)
            if call.ended:
                with anyio.CancelScope(shield=True), anyio.move_on_after(JOURNAL_WAIT_S):
                    await call.settled.wait()
            row = await self.row(row["task_id"])
        out = outcome(row)
        return {**out, **self.saga(row["task_id"])} if isinstance(out, dict) else out

    async def resume(
        self, token: str, steps: list[dict[str, Any]], relay: Relay | None
    ) -> types.CallToolResult | dict[str, Any]:
        """Answer a suspended saga's steps, then wait (bounded) for its next suspension or its result."""
        claims = sagas.verify(self.hub.install_key, token)
        for step in steps:
            if step["step_id"] not in claims["s"]:
                raise UsageError(
                    f"Step {step['step_id']} is not one of this saga's steps ({', '.join(claims['s'])})."
                )
        for step in steps:
            row = await self.hub.questions.resolve(step["step_id"])
            if "error" in step and "result" not in step:
                if not await self.hub.questions.settle(
                    row["request_id"], "rejected", error=str(step["error"]), by="model"
                ):
                    raise already_answered(row)
            else:
                await self.hub.questions.answer(
                    row["request_id"], step_answer(row["kind"], step.get("result")), by="model"
                )
        return await self.result(claims["t"], None, relay)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        row = await self.row(task_id)
        if row["status"] != TaskStatus.WORKING:
            raise UsageError(f"Task {row['task_id']} is already {row['status']}; there is nothing to cancel.")
        call = self.calls.get(row["task_id"])
        if call is None:  # another emceepee process owns it: ask it through the journal
            await self.hub.journal.run(Journal.request_cancel, row["task_id"])
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
        await self.hub.questions.withdraw(call.call_id, f"its call was {why.value}")
        with anyio.move_on_after(CANCEL_WAIT_S):
            await call.settled.wait()

    # ---- housekeeping (called by the hub's watcher) ------------------------------------

    async def expire_due(self) -> None:
        for call in [c for c in self.calls.values() if c.expired and not c.ended]:
            await self.stop(call, TaskStatus.EXPIRED)

    async def adopt(self, task_ids: list[str]) -> None:
        """Re-drive the suspended 2026-07-28 calls a dead emceepee left: answer their rounds, call again."""
        for task_id in task_ids:
            row = await self.hub.journal.run(Journal.task, task_id)
            if row is None:
                continue
            call = Call(
                row["server"],
                row["tool"],
                json.loads(row["args"] or "null"),
                ttl_s=self.hub.config.defaults.task_ttl_max_ms / 1000,
                call_id=task_id,
                created_at=row["created_at"],
                state=CallState.PROMOTED,
            )
            call.row_written.set()
            self.calls[task_id] = call
            self.hub.spawn(self._redrive, call, row, name=f"redrive {task_id}")

    async def _redrive(self, call: Call, row: dict[str, Any]) -> None:
        round_ = int(row["round"] or 0)
        current = [
            r
            for r in await self.hub.journal.run(Journal.pending_rows, status=None, task_id=call.call_id)
            if r["round"] == round_
        ]
        asked = {str(r["input_key"]): self.hub.questions.adopt(r) for r in current}
        backend = self.hub.backends.get(call.server)
        if backend is None:
            call.error = BackendError(
                f"Server '{call.server}' is no longer configured; task {call.call_id} cannot resume."
            )
            call.stop_as = TaskStatus.FAILED
            await self._end(call)
            return
        await self._run(call, backend, Round(row["request_state"], asked, round_))

    async def cancel_requested(self) -> None:
        for task_id in await self.hub.journal.run(Journal.cancel_requests, self.hub.instance_id):
            call = self.calls.get(task_id)
            if call is not None:
                await self.stop(call, TaskStatus.CANCELLED)
            else:  # its call is gone (finished as we looked): settle the row anyway
                await self.hub.journal.run(
                    Journal.finish_task, task_id, TaskStatus.CANCELLED, error="cancelled"
                )

    def working(self) -> list[dict[str, Any]]:
        """Category 3, a snapshot: this process's calls still running, by server."""
        by_server: dict[str, list[dict[str, Any]]] = {}
        for call in self.calls.values():
            if call.state == CallState.PROMOTED:
                by_server.setdefault(call.server, []).append(
                    {"task_id": call.call_id, "tool": call.tool, "status": "working"}
                )
        return [{"server": server, "working_tasks": tasks} for server, tasks in by_server.items()]


def _journal_warning(call: Call) -> dict[str, Any]:
    """Tell the model when its task could not be journaled: a restart of emceepee would lose it."""
    if call.unjournaled is None:
        return {}
    warning = {"type": type(call.unjournaled).__name__, "message": call.unjournaled.message}
    hint = "The call goes on and this emceepee keeps its result, but a restart would lose it."
    return {"journal_error": {**warning, "hint": f"{call.unjournaled.hint} {hint}".strip()}}
