"""One call, driven: from its first request to its end, and again after a restart; and the one
registry of the calls in flight (`InFlight`), which only the driver adds to and removes from.

`Driver.start` runs a call in serve's task group under the call's own cancel scope (see
calls/tasks.py for the lifecycle around it): `run` waits for a backend still starting, runs the
call's steps (calls/chain.py over calls/steps.py), and however it ends — a result, an error, a
cancel, emceepee stopping — says so once (a `CallEnd`, calls/end.py); `end` then wakes whoever
waits, journals the end of a promoted call (bounded) and forgets it. `stop` cancels a call for a
reason: a cancel (the host's, cancel_task's, or one another process asked for), its TTL, or
emceepee stopping. `adopt` and `redrive` take up the calls a dead emceepee left: a 2026-07-28
call suspended on input, or one resuming itself with a backend's token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend
from emceepee_cli.backends.failures import describe
from emceepee_cli.calls import lifetime, policy
from emceepee_cli.calls.call import Call, CallState, as_model
from emceepee_cli.calls.chain import Chain, Step
from emceepee_cli.calls.end import CallEnd, Failed, Returned, ReturnedRaw, Stopped
from emceepee_cli.calls.input_rounds import Round, Rounds
from emceepee_cli.calls.recorder import JOURNAL_WAIT_S, Recorder
from emceepee_cli.calls.steps import Stepper
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import BackendError, EmceepeeError
from emceepee_cli.questions import url_questions
from emceepee_cli.questions.questions import Questions
from emceepee_cli.shared import Shared
from emceepee_cli.store.records import TaskRow, TaskStatus
from emceepee_cli.store.unreadable import UnreadableRow, json_column, skipped, text

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 5.0  # a stopped call's end is waited for this long
Check = Callable[[], Awaitable[None]]  # what is checked once the backend is up (the tool, its arguments)


class InFlight:
    """The calls this process runs now, by id. A call enters as it starts (or is adopted) and
    leaves once its end is recorded (`Driver.end`); everyone else finds and walks them."""

    def __init__(self) -> None:
        self._calls: dict[str, Call] = {}

    def __repr__(self) -> str:
        return f"<InFlight {len(self._calls)} calls>"

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[Call]:
        """The calls now (a snapshot: a call may leave while they are walked)."""
        return iter(list(self._calls.values()))

    def add(self, call: Call) -> None:
        self._calls[call.call_id] = call

    def remove(self, call: Call) -> None:
        self._calls.pop(call.call_id, None)

    def find(self, call_id: str) -> Call | None:
        return self._calls.get(call_id)

    def on(self, server: str) -> list[Call]:
        """The calls on `server` now (not those still waiting for it to start)."""
        return [
            c for c in self._calls.values() if c.server == server and not c.ended and not c.awaiting_backend
        ]


class Driver:
    def __init__(
        self,
        shared: Shared,
        questions: Questions,
        recorder: Recorder,
        *,
        backends: Callable[[str], Backend | None],
        roots: Callable[[ServerSpec], Awaitable[types.ListRootsResult]] | None = None,
    ) -> None:
        self.shared = shared
        self.journal = shared.journal
        self.runtime = shared.runtime
        self.defaults = shared.defaults
        self.questions = questions
        self.recorder = recorder
        self.calls = InFlight()
        self.backends = backends
        self._roots = roots
        self.rounds = Rounds(self.journal, questions, self.runtime, self._roots_of)
        self.stopping: str | None = None  # why emceepee is stopping, once it is

    def __repr__(self) -> str:
        return f"<Driver in_flight={len(self.calls)} stopping={self.stopping!r}>"

    async def _roots_of(self, server: str) -> types.ListRootsResult:
        """A backend's roots, asked in a 2026-07-28 input round (session/roots.py decides them)."""
        backend = self.backends(server)
        if backend is None or self._roots is None:
            return types.ListRootsResult(roots=[])
        return await self._roots(backend.spec)

    def start(self, call: Call, backend: Backend, check: Check | None) -> None:
        """Run the call in serve's task group (not in the host's request, which may give up first)."""
        self.calls.add(call)
        self.runtime.spawn(self.run, call, backend, None, None, check, name=f"call {call.call_id}")

    async def run(
        self,
        call: Call,
        backend: Backend,
        resume_round: Round | None,
        adopted: list[Step] | None = None,
        check: Check | None = None,
    ) -> None:
        """The call itself, under its own cancel scope; however it ends, `end` records how."""
        ended: CallEnd | None = None  # None: cancelled
        try:
            with call.scope:
                try:
                    if check is not None:
                        await self._started(call, backend)
                        await check()
                    ended = Returned(await self._drive(call, backend, resume_round, adopted))
                except url_questions.UrlElicitationRequired as exc:
                    ended = Failed(await url_questions.park(self.questions, call.server, call.tool, exc))
                except EmceepeeError as exc:
                    ended = Failed(exc)
                except Exception as exc:
                    log.exception(
                        "call %s (%s.%s) failed inside emceepee", call.call_id, call.server, call.tool
                    )
                    ended = Failed(
                        BackendError(
                            f"The call to {call.server}.{call.tool} failed inside emceepee: {describe(exc)}",
                            hint="This is a bug in emceepee; its stderr log has the traceback. "
                            "Call the tool again.",
                        )
                    )
        finally:
            if call.end is None:  # else a raw result ended it as it came (calls/raw_step.py): that stands
                call.conclude(self._ending(call, ended))
            with anyio.CancelScope(shield=True):
                await self.end(call)

    def _ending(self, call: Call, ended: CallEnd | None) -> CallEnd:
        """How the call ended, once its work is over: what it returned or failed with (None: it was
        cancelled), told apart by why it was stopped."""
        if ended is None:
            # Cancelled: by us (cancel_task, TTL, the host) with a reason, else emceepee itself is stopping.
            status = call.stopped_as or TaskStatus.INTERRUPTED
            how = "expired" if status == TaskStatus.EXPIRED else f"was {status.value}"
            waiting = f" while backend '{call.server}' was still starting" if call.awaiting_backend else ""
            ended = Stopped(status, BackendError(f"The call to {call.server}.{call.tool} {how}{waiting}."))
        elif isinstance(ended, Failed) and call.stopped_as is not None:
            ended = Stopped(call.stopped_as, ended.error)  # it failed as it was stopped: it ends as stopped
        if not isinstance(ended, Returned) and self.stopping is not None:
            # emceepee stopped the backend itself: whatever the call ended with, that is why.
            return Stopped(
                TaskStatus.INTERRUPTED,
                BackendError(
                    f"emceepee serve stopped ({self.stopping}) while the call to {call.server}.{call.tool}"
                    " was running; the backend was stopped with it."
                ),
            )
        return ended

    async def end(self, call: Call) -> None:
        """Wake the waiters, journal the end of a promoted call (bounded), and forget it."""
        if isinstance(call.end, ReturnedRaw) and call.promoted and call.unjournaled is not None:
            as_model(call)  # kept in memory, not journaled: as a model, as every other result
        if call.close() == CallState.FINISHED:
            if call.chain is not None:
                with anyio.move_on_after(JOURNAL_WAIT_S):
                    await call.chain.hooks.record()
            await self.recorder.finished(call)
        self.calls.remove(call)
        call.settled.set()
        for other in self.calls.on(call.server):  # one fewer call that can have asked a question
            other.nudge()  # tied to none: those left look again (calls/tasks.py, `Tasks.suspended`)

    async def stop(self, call: Call, why: TaskStatus) -> None:
        """Cancel the backend call for real (the backend gets notifications/cancelled), withdraw its
        questions, and wait (bounded) until its end is recorded."""
        call.stop(why)
        await self.questions.withdraw(call.call_id, f"its call was {why.value}")
        with anyio.move_on_after(CANCEL_WAIT_S):
            await call.settled.wait()

    async def expire_due(self) -> None:
        """Stop the calls past their TTL (a call that waits on a question outlives it, see
        calls/lifetime.py)."""
        for call in [c for c in self.calls if c.expired and not c.ended]:
            if not self._extend_for_question(call):
                await self.stop(call, TaskStatus.EXPIRED)

    def _extend_for_question(self, call: Call) -> bool:
        expires_at = lifetime.extend_for_questions(
            call, self.questions.listed(server=call.server), self.defaults.task_ttl_max_ms / 1000
        )
        if expires_at is not None and call.promoted:
            self.runtime.write(self.journal, self.journal.sync.tasks.set_expiry, call.call_id, expires_at)
        return expires_at is not None

    async def cancel_requested(self) -> None:
        """Carry out the cancels other processes asked for through the journal (`emceepee tasks cancel`)."""
        for task_id in await self.journal.run(
            self.journal.sync.tasks.cancel_requests, self.recorder.instance_id
        ):
            call = self.calls.find(task_id)
            if call is not None:
                await self.stop(call, TaskStatus.CANCELLED)
            else:  # its call is gone (finished as we looked): settle the row anyway
                await self.journal.run(
                    self.journal.sync.tasks.finish, task_id, TaskStatus.CANCELLED, error="cancelled"
                )

    def stop_all(self, why: str) -> None:
        """emceepee is stopping (`why`): every call still running ends as interrupted, and says so.

        Each is cancelled here, not left to its backend's stop: a call waiting on something of
        emceepee's own (an approval, a 2026-07-28 round's answers) holds no backend request that
        the stop would end, and would keep serve's task group, and so serve, open for ever."""
        self.stopping = why
        for call in self.calls:
            call.stop(TaskStatus.INTERRUPTED)

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
            self.shared,
            questions=self.questions,
            rounds=self.rounds,
            recorder=self.recorder,
            resume_round=resume_round,
        )
        chain = Chain(call.call_id, call.server, backend, self.defaults, follow, stepper)
        stepper.steps = chain.steps
        call.chain = chain
        return chain

    async def adopt(self, task_ids: list[str]) -> None:
        """Re-drive the calls a dead emceepee left that can go on: a 2026-07-28 call suspended on
        input (answer its round, call again), a call resuming itself with a backend's token."""
        for task_id in task_ids:
            row = await self.journal.run(self.journal.sync.tasks.row, task_id)
            if row is None:
                continue
            what = f"task {task_id}"
            try:
                call = Call(
                    text(row["server"], what),
                    text(row["tool"], what),
                    json_column(row["args"] or "null", what, object),
                    ttl_s=self.defaults.task_ttl_max_ms / 1000,
                    call_id=task_id,
                    created_at=text(row["created_at"], what),
                    state=CallState.PROMOTED,
                )
            except UnreadableRow as exc:  # it cannot be called again: it ends, saying why
                skipped(exc)
                await self.journal.run(
                    self.journal.sync.tasks.finish, task_id, TaskStatus.FAILED, error=exc.message
                )
                continue
            call.row_written.set()
            self.calls.add(call)
            self.runtime.spawn(self.redrive, call, row, name=f"redrive {task_id}")

    async def redrive(self, call: Call, row: TaskRow) -> None:
        backend = self.backends(call.server)
        if backend is None:
            if row["request_state"] is None and row.get("resume_token"):
                # The backend's token stays in the journal: the task can go on once the server is back.
                gone = BackendError(
                    f"Server '{call.server}' is no longer configured, so task {call.call_id} could not "
                    "go on. Its resume token is kept: add the server back, then call execute_tool with "
                    "the task's resume_token (get_task shows it)."
                )
                call.conclude(Stopped(TaskStatus.INTERRUPTED, gone))
            else:
                gone = BackendError(
                    f"Server '{call.server}' is no longer configured; task {call.call_id} cannot resume."
                )
                call.conclude(Failed(gone))
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
