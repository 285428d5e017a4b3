"""Tool calls and the tasks they become when they are slow.

Lifecycle of one `execute_tool` call (`calls.CallState`, moved only by `Call.move`): it starts
`running` in serve's task group (not in the request handler, so neither an upstream timeout nor
a promotion can cancel it), under its own cancel scope. The handler waits up to `timeout_ms`
(clamped to `max_wait_ms`). Done in time: `answered`, the backend's result goes back and no task
ever existed. Not done, or blocked on a question: `promoted` — a `working` task row is journaled
and the handler answers with it — and the call goes on; when it ends (`finished`) its end is
written to the journal (`completed | failed | cancelled | expired | interrupted`) and announced as
an event. Every wait on the journal inside a shield is bounded (`JOURNAL_WAIT_S`). `timeout_ms`
never becomes a request timeout on the backend call: that would cancel it and its questions.
This module keeps the waiting and the task tools; the call runs in calls/runner.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli import seal
from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls import lifetime, policy, resume
from emceepee_cli.calls.askers import Askers
from emceepee_cli.calls.call import (
    Call,
    CallAnswer,
    CallState,
    Passed,
    ProxyTask,
    Relay,
    TaskAnswer,
    WorkingTask,
    final_row,
    journal_warning,
    outcome,
    task_row,
)
from emceepee_cli.calls.chain import Step
from emceepee_cli.calls.end import Failed, KeptRaw, Returned, ReturnedRaw, Stopped
from emceepee_cli.calls.host_rounds import HostRetry, HostRounds
from emceepee_cli.calls.recorder import JOURNAL_WAIT_S, Recorder
from emceepee_cli.calls.runner import Check, Driver, InFlight
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import NotFound, UsageError
from emceepee_cli.questions import sagas
from emceepee_cli.questions.answers import already_answered
from emceepee_cli.questions.newest import merged, newest
from emceepee_cli.questions.questions import Questions
from emceepee_cli.shared import Shared
from emceepee_cli.store.pages import TaskFilter, clamp_limit
from emceepee_cli.store.records import StepRow, TaskJson, TaskRow, TaskStatus, task_json
from emceepee_cli.store.tables.tasks import TASKS_LISTED
from emceepee_cli.store.unreadable import json_column

KEPT_OUTCOMES = ("ok", "tool_error")  # a step that ended with a result


log = logging.getLogger(__name__)


class Tasks:
    def __init__(
        self,
        shared: Shared,
        questions: Questions,
        *,
        backends: Callable[[str], Backend | None],
        install_key: bytes,
        roots: Callable[[ServerSpec], Awaitable[types.ListRootsResult]] | None = None,
    ) -> None:
        self.journal = shared.journal
        self.events = shared.events
        self.runtime = shared.runtime
        self.defaults = shared.defaults
        self.instance_id = shared.instance_id
        self.questions = questions
        self.install_key = install_key
        self.recorder = Recorder(shared)
        self.driver = Driver(shared, questions, self.recorder, backends=backends, roots=roots)
        self.host_rounds = HostRounds(shared.journal, questions, install_key, shared.instance_id)
        self.askers = Askers(questions, self.driver.calls)  # which calls its questions hold

    def __repr__(self) -> str:
        return f"<Tasks in_flight={len(self.calls)}>"

    @property
    def calls(self) -> InFlight:
        """The calls in flight; the driver (calls/runner.py) keeps their registry."""
        return self.driver.calls

    # ---- execute_tool --------------------------------------------------------------------

    async def execute(
        self,
        backend: Backend,
        tool: str,
        args: dict[str, Any] | None,
        timeout_ms: int | None,
        relay: Relay | None,
        check: Check | None = None,
        *,
        follow_next_tool: bool | None = None,
        auto_resume: bool | None = None,
        resume_token: str | None = None,
        fast: bool = False,
        asks: types.ClientCapabilities | None = None,
    ) -> CallAnswer:
        """The call, in serve's task group. With `check`, the backend is still starting: the call
        first waits for it (as part of the call, so past `timeout_ms` it is a task), then runs
        `check`, then calls the tool. `fast`: the backend may be called raw (calls/raw_step.py).
        `asks`: a 2026-07-28 host's request declared these capabilities, so the call's own questions
        it can answer come back as an input round (calls/host_rounds.py) rather than as a task."""
        if resume_token is not None and resume.ours(resume_token):
            return await self.by_token(backend, tool, args, resume_token, timeout_ms, relay, check)
        if resume_token is not None and seal.unseal(self.install_key, resume_token.strip()) is not None:
            raise UsageError(
                "This is a saga_token, not a resume_token.",
                hint="Answer the saga's steps with resume_tool(saga_token, completed_steps).",
            )
        call = Call(backend.name, tool, args, ttl_s=self.defaults.task_ttl_ms / 1000)
        call.awaiting_backend = check is not None
        call.follow = policy.follow(backend.spec, self.defaults, follow_next_tool, auto_resume)
        call.token = resume_token
        call.fast = fast
        self.driver.start(call, backend, check)
        wait_ms = self.defaults.timeout_ms if timeout_ms is None else timeout_ms
        try:
            await self.wait(call, min(wait_ms, self.defaults.max_wait_ms) / 1000, relay)
        except anyio.get_cancelled_exc_class():
            if not call.ended:  # the host gave up on this call: so do we, as a direct call would
                call.stop(TaskStatus.CANCELLED)
                if self.driver.stopping is None:  # not emceepee's own stop: the host's limit, or its cancel
                    lifetime.host_gave_up(call, self.events)
            raise
        if call.ended:  # in time (a chain with several results is journaled as a task, yet answered)
            return await self.answered(call)
        await self.recorder.promote(call)
        self.events.emit("task_created", call.server, {"task_id": call.call_id, "tool": call.tool})
        if asks is not None and (round_ := await self.host_rounds.offer(call, asks)) is not None:
            return round_
        saga = self.saga(call.call_id)  # its questions whole, once: the rest of the reply reminds
        task, pending = await self.get_json(call.call_id), await self.pending_on_server(call.server)
        return ProxyTask(task, pending, saga, journal_warning(call))

    async def continued(
        self,
        server: str,
        tool: str,
        args: dict[str, Any] | None,
        timeout_ms: int | None,
        relay: Relay | None,
        *,
        retry: HostRetry,
        asks: types.ClientCapabilities,
    ) -> CallAnswer:
        """A 2026-07-28 host's retry of the call `server.tool(args)` with the answers to its input
        round: they are recorded (calls/host_rounds.py), then the call is waited for as execute_tool
        waits (bounded): its result, its next round, or the task it is."""
        task_id = await self.host_rounds.take(retry, server, tool, args)
        wait_ms = self.defaults.timeout_ms if timeout_ms is None else timeout_ms
        out = await self.result(task_id, wait_ms, relay)
        if not isinstance(out, WorkingTask):
            return out
        running = self.calls.find(task_id)
        if running is not None and (round_ := await self.host_rounds.offer(running, asks)) is not None:
            return round_
        return ProxyTask(await self.get_json(task_id), await self.pending_on_server(server), out.saga)

    async def answered(self, call: Call) -> types.CallToolResult | Passed:
        """What the host gets for a call that ended while it waited: its result, or its error raised."""
        match call.end:
            case Returned(result):
                return result
            case ReturnedRaw(body):
                return Passed(body)  # the reply releases it once written
            case KeptRaw():  # promoted meanwhile: its bytes went to the journal
                return await self.recorder.kept(call.call_id)
            case Failed(error) | Stopped(_, error):
                raise error
            case None:
                raise AssertionError(f"{call!r} ended without saying how")

    async def by_token(
        self,
        backend: Backend,
        tool: str,
        args: dict[str, Any] | None,
        token: str,
        timeout_ms: int | None,
        relay: Relay | None,
        check: Check | None = None,
    ) -> CallAnswer:
        """execute_tool with emceepee's own resume token: the task's result, waited for (bounded),
        or, still running, the task again as execute_tool gives one (with its resume token); an
        interrupted task whose backend gave a resume token is re-issued with that token (after
        `check`, once a backend still starting is up, as any call)."""
        claims = resume.verify(self.install_key, token)
        resume.check_call(claims, backend.name, tool, args)
        row = await self.row(claims["t"])
        if row["status"] == TaskStatus.INTERRUPTED and row.get("resume_token"):
            return await self.execute(
                backend, tool, args, timeout_ms, relay, check, resume_token=row["resume_token"]
            )
        out = await self.result(row["task_id"], timeout_ms, relay)
        if not isinstance(out, WorkingTask):
            return out
        task, pending = await self.get_json(row["task_id"]), await self.pending_on_server(row["server"])
        return ProxyTask(task, pending, out.saga)

    async def wait(self, call: Call, timeout_s: float, relay: Relay | None) -> None:
        """Wait (bounded) until the call ends or is suspended on a question for the client.

        Meanwhile its progress (or a heartbeat) is relayed to the host, if the host asked.
        """
        with anyio.move_on_after(timeout_s):
            while not call.ended:
                if self.askers.suspended(call):
                    await self.questions.sync()  # an answer another process wrote may not be noticed yet
                    if self.askers.suspended(call):
                        return
                await self._woken(call, relay)

    async def _woken(self, call: Call, relay: Relay | None) -> None:
        """Until the call's next wake-up: it ended, a question arrived, it was promoted."""
        wake = call.wake
        call.relay = relay
        try:
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

    # ---- the task tools ------------------------------------------------------------------

    def saga(self, task_id: str) -> dict[str, Any] | None:
        """A task blocked on questions, as a saga the model can resume; None when it is not."""
        rows = {q.request_id: q.row for q in self.questions.live.values()}
        asked = self.questions.listed(task_id=task_id)
        self.questions.shown(q["request_id"] for q in asked)
        return sagas.view(self.install_key, task_id, [rows[q["request_id"]] for q in asked]).get("saga")

    async def row(self, task_id: str) -> TaskRow:
        unjournaled = self.recorder.unjournaled
        known = [*(c.call_id for c in self.calls if c.promoted), *unjournaled]
        resolved = await self.journal.run(self.journal.sync.tasks.resolve, task_id, known)
        # a kept result: see `Recorder.kept`
        row = await self.journal.run(self.journal.sync.tasks.row, resolved, whole=False)
        if row is None and (call := self.calls.find(resolved)) is not None and call.promoted:
            return task_row(call, self.instance_id)  # not journaled; this process still knows it
        if row is None and (ended := unjournaled.get(resolved)) is not None:
            return final_row(ended, self.instance_id)
        if row is None:
            raise NotFound(f"No task '{task_id}'.", hint=TASKS_LISTED)
        return row

    async def get_json(self, task_id: str) -> TaskJson:
        """The task; while it works, with a resume token that gets its result (calls/resume.py), and
        the same once interrupted holding a backend's resume token (with it, the call goes on)."""
        row = await self.row(task_id)
        task = task_json(row)
        token = seal.task_resume_token(self.install_key, row, self.defaults.retention_s)
        if token is not None:
            task["resume_token"] = token
        return task

    async def steps(self, task_id: str) -> list[dict[str, Any]]:
        """Every result the task's call produced (chained steps, resumes), each whole."""
        rows = await self.journal.run(self.journal.sync.steps.rows, task_id)
        return [await self._step(r) for r in rows]

    async def _step(self, row: StepRow) -> dict[str, Any]:
        """A step with its whole result; one that is the task's own result (store/tables/steps.py) is read
        from the task and shown as its step row would have kept it."""
        step = Step.from_row(row)
        if row["result"] is not None or row["outcome"] not in KEPT_OUTCOMES:
            where = f"steps of task {row['task_id']}"
            return {**step.trace(), "result": json_column(row["result"] or "null", where, object)}
        task = await self.journal.run(self.journal.sync.tasks.row, row["task_id"])
        if task is None or task["result"] is None:
            return {**step.trace(), "result": None}
        step.result = types.CallToolResult.model_validate_json(task["result"])
        return {
            **step.trace(),
            "result": json.loads(step.result.model_dump_json(by_alias=True, exclude_none=True)),
        }

    async def pending_on_server(self, server: str) -> dict[str, Any]:
        """The server's working tasks and its questions, the newest few of each (questions/newest.py)."""
        rows = await self.journal.run(
            self.journal.sync.tasks.rows, server=server, instance_id=self.instance_id
        )
        kept, cut = newest({"tasks": rows}, {"tasks": f"list_tasks(server='{server}')"})
        questions = self.questions.for_server(server)
        tasks = [task_json(r) for r in kept["tasks"]]
        return {"server": server, "tasks": tasks, **questions, **merged(questions, cut)}

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
        page = await self.journal.run(self.journal.sync.tasks.page, where, cursor, clamp_limit(limit))
        return {**page, "tasks": [task_json(r) for r in page["tasks"]]}

    async def result(self, task_id: str, timeout_ms: int | None, relay: Relay | None) -> TaskAnswer:
        row = await self.row(task_id)
        call = self.calls.find(row["task_id"])
        if row["status"] == TaskStatus.WORKING and call is not None:
            max_wait = self.defaults.max_wait_ms
            await self.wait(call, min(max_wait if timeout_ms is None else timeout_ms, max_wait) / 1000, relay)
            if call.ended:
                with anyio.CancelScope(shield=True), anyio.move_on_after(JOURNAL_WAIT_S):
                    await call.settled.wait()
            row = await self.row(row["task_id"])
        if row["status"] == TaskStatus.COMPLETED and row["result"] is None:
            return await self.recorder.kept(row["task_id"])
        out = outcome(row)
        return WorkingTask(out, self.saga(row["task_id"])) if isinstance(out, dict) else out

    async def resume(self, token: str, steps: list[dict[str, Any]], relay: Relay | None) -> TaskAnswer:
        """Answer a suspended saga's steps, then wait (bounded) for its next suspension or its result.

        `steps` may repeat the saga's whole history: a step answered before with the same answer
        changes nothing; a different one is refused. Every step is checked before any is applied."""
        claims = sagas.verify(self.install_key, token)
        rows = await self.journal.run(self.journal.sync.pending.rows, status=None, task_id=claims["t"])
        for planned in sagas.plan(claims["t"], rows, steps):
            request_id = planned.row["request_id"]
            if planned.error is not None:
                await self.journal.run(self.journal.sync.pending.set_error_detail, request_id, planned.error)
                message = str(planned.error["message"])
                if not await self.questions.settle(request_id, "rejected", error=message, by="model"):
                    raise already_answered(await self.questions.resolve(request_id))
            elif planned.answer is not None:
                await self.questions.answer(request_id, planned.answer, by="model")
        return await self.result(claims["t"], None, relay)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        row = await self.row(task_id)
        if row["status"] != TaskStatus.WORKING:
            raise UsageError(f"Task {row['task_id']} is already {row['status']}; there is nothing to cancel.")
        call = self.calls.find(row["task_id"])
        if call is None:  # another emceepee process owns it: ask it through the journal
            await self.journal.run(self.journal.sync.tasks.request_cancel, row["task_id"])
            return {
                "task": task_json(row),
                "cancel_requested": True,
                "message": "Another emceepee process owns this task; it was asked to cancel it.",
            }
        await self.driver.stop(call, TaskStatus.CANCELLED)
        return {"task": await self.get_json(row["task_id"])}

    def stop_all(self, why: str = "it was told to stop") -> None:
        """emceepee is stopping (`why`): every call still running ends as interrupted (calls/runner.py)."""
        self.driver.stop_all(why)

    def working(self) -> list[dict[str, Any]]:
        """Category 3, a snapshot: this process's calls still running, by server."""
        by_server: dict[str, list[dict[str, Any]]] = {}
        for call in self.calls:
            if call.state == CallState.PROMOTED:
                by_server.setdefault(call.server, []).append(
                    {"task_id": call.call_id, "tool": call.tool, "status": "working"}
                )
        out = []
        for server, tasks in by_server.items():
            kept, cut = newest({"working_tasks": tasks}, {"working_tasks": f"list_tasks(server='{server}')"})
            out.append({"server": server, **kept, **cut})
        return out

    # ---- housekeeping (the watcher) ------------------------------------------------------

    def promoted(self) -> list[str]:
        """The ids of this process's calls that are tasks still running."""
        return [c.call_id for c in self.calls if c.state == CallState.PROMOTED]

    async def expire_due(self) -> None:
        await self.driver.expire_due()

    async def cancel_requested(self) -> None:
        await self.driver.cancel_requested()

    async def adopt(self, task_ids: list[str]) -> None:
        """Re-drive the calls a dead emceepee left that can go on (calls/runner.py)."""
        await self.driver.adopt(task_ids)
