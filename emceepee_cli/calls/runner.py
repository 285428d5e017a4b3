"""One call, driven: from its first request to its end, and again after a restart.

`Driver.run` is the call itself, in serve's task group under the call's own cancel scope (see
calls/tasks.py for the lifecycle around it): it waits for a backend still starting, runs the
call's steps (calls/chain.py over calls/steps.py), and however it ends — a result, an error, a
cancel, emceepee stopping — `end` wakes whoever waits, journals the end of a promoted call
(bounded) and forgets it. `redrive` takes up a call a dead emceepee left: a 2026-07-28 call
suspended on input, or one resuming itself with a backend's token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend
from emceepee_cli.backends.failures import describe
from emceepee_cli.calls import policy
from emceepee_cli.calls.call import Call, CallState, as_model
from emceepee_cli.calls.chain import Chain, Step
from emceepee_cli.calls.input_rounds import Round, Rounds
from emceepee_cli.calls.recorder import JOURNAL_WAIT_S, Recorder
from emceepee_cli.calls.steps import Stepper
from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.errors import BackendError, EmceepeeError
from emceepee_cli.questions import url_questions
from emceepee_cli.questions.questions import Questions
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import TaskRow, TaskStatus

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]  # what is checked once the backend is up (the tool, its arguments)


class Driver:
    def __init__(
        self,
        journal: AsyncJournal,
        questions: Questions,
        runtime: Runtime,
        recorder: Recorder,
        defaults: Defaults,
        calls: dict[str, Call],
        *,
        backends: Callable[[str], Backend | None],
        roots: Callable[[ServerSpec], Awaitable[types.ListRootsResult]] | None = None,
    ) -> None:
        self.journal = journal
        self.questions = questions
        self.runtime = runtime
        self.recorder = recorder
        self.defaults = defaults
        self.calls = calls  # the calls in flight, shared with calls/tasks.py: a call leaves it in `end`
        self.backends = backends
        self._roots = roots
        self.rounds = Rounds(journal, questions, runtime, self._roots_of)
        self.stopping: str | None = None  # why emceepee is stopping, once it is

    def __repr__(self) -> str:
        return f"<Driver in_flight={len(self.calls)} stopping={self.stopping!r}>"

    async def _roots_of(self, server: str) -> types.ListRootsResult:
        """A backend's roots, asked in a 2026-07-28 input round (session/roots.py decides them)."""
        backend = self.backends(server)
        if backend is None or self._roots is None:
            return types.ListRootsResult(roots=[])
        return await self._roots(backend.spec)

    async def run(
        self,
        call: Call,
        backend: Backend,
        resume_round: Round | None,
        adopted: list[Step] | None = None,
        check: Check | None = None,
    ) -> None:
        """The call itself, under its own cancel scope; however it ends, `end` records how."""
        try:
            with call.scope:
                try:
                    if check is not None:
                        await self._started(call, backend)
                        await check()
                    call.result = await self._drive(call, backend, resume_round, adopted)
                except url_questions.UrlElicitationRequired as exc:
                    call.error = await url_questions.park(self.questions, call.server, call.tool, exc)
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
                await self.end(call)

    async def end(self, call: Call) -> None:
        """Wake the waiters, journal the end of a promoted call (bounded), and forget it."""
        if call.raw is not None and call.promoted and call.unjournaled is not None:
            as_model(call)  # kept in memory, not journaled: as a model, as every other result
        if call.end() == CallState.FINISHED:
            if call.chain is not None:
                with anyio.move_on_after(JOURNAL_WAIT_S):
                    await call.chain.hooks.record()
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
                lambda: self.journal.run(self.journal.sync.tasks.set_status_message, call.call_id, message)
            )

    async def _drive(
        self, call: Call, backend: Backend, resume_round: Round | None, adopted: list[Step] | None = None
    ) -> types.CallToolResult:
        """The call's steps: its tool, then what the results lead to (calls/chain.py)."""
        chain = self._chain(call, backend, resume_round)
        if resume_round is not None:  # adopted in the middle of its input rounds: approved before, if at all
            policy.refuse_denied(backend.spec, call.tool)  # the config may deny it since
            await backend.wait_ready(self.defaults.max_wait_ms / 1000)
            return await chain.go_on(Step(1, "call", call.tool, call.args), None)
        if adopted is None:
            return await chain.run(call.tool, call.args, call.token)
        # A resuming call a dead emceepee left: re-issue its last step's request with the token.
        chain.restore(adopted)
        last = adopted[-1] if adopted else Step(0, "call", call.tool, call.args)
        step = Step(len(adopted) + 1, "resume" if adopted else "call", last.tool, last.args)
        policy.refuse_denied(backend.spec, step.tool)
        await backend.wait_ready(self.defaults.max_wait_ms / 1000)
        return await chain.go_on(step, call.token)

    def _chain(self, call: Call, backend: Backend, resume_round: Round | None) -> Chain:
        follow = call.follow or policy.follow(backend.spec, self.defaults)
        stepper = Stepper(
            call,
            backend,
            journal=self.journal,
            questions=self.questions,
            rounds=self.rounds,
            recorder=self.recorder,
            runtime=self.runtime,
            ready_wait_s=self.defaults.max_wait_ms / 1000,
            resume_round=resume_round,
        )
        chain = Chain(call.call_id, call.server, backend, self.defaults, follow, stepper)
        stepper.steps = chain.steps
        call.chain = chain
        return chain

    async def redrive(self, call: Call, row: TaskRow) -> None:
        backend = self.backends(call.server)
        if backend is None:
            if row["request_state"] is None and row.get("resume_token"):
                # The backend's token stays in the journal: the task can go on once the server is back.
                call.error = BackendError(
                    f"Server '{call.server}' is no longer configured, so task {call.call_id} could not "
                    "go on. Its resume token is kept: add the server back, then call execute_tool with "
                    "the task's resume_token (get_task shows it)."
                )
                call.stop_as = TaskStatus.INTERRUPTED
            else:
                call.error = BackendError(
                    f"Server '{call.server}' is no longer configured; task {call.call_id} cannot resume."
                )
                call.stop_as = TaskStatus.FAILED
            await self.end(call)
            return
        if row["request_state"] is None and row.get("resume_token"):
            call.token = row.get("resume_token")
            call.follow = policy.follow(backend.spec, self.defaults, auto_resume=True)
            rows = await self.journal.run(self.journal.sync.steps.rows, call.call_id)
            steps = [Step.from_row(r) for r in rows]
            await self.run(call, backend, None, steps)
            return
        resume_round = await self.rounds.last_round(
            call.call_id, row["request_state"], int(row["round"] or 0)
        )
        await self.run(call, backend, resume_round)
