"""A call recorded as a task: its working row when promoted, its progress, and its end (a raw
result's bytes journaled as they are, and read back from there: `kept`).

A journal that cannot take a row does not stop the call: the task is kept in memory instead
(`Call.unjournaled`, and the last `UNJOURNALED_KEPT` ended ones in `unjournaled`), so this process
can still hand its result over; the model is told a restart would lose it.
"""

from __future__ import annotations

import time

import anyio

from emceepee_cli.calls import spool
from emceepee_cli.calls.call import Call, CallState, Passed, as_model, final_row, task_row
from emceepee_cli.calls.end import KeptRaw, Returned, ReturnedRaw
from emceepee_cli.errors import EmceepeeError, NotFound
from emceepee_cli.shared import Shared
from emceepee_cli.store.tables.tasks import TASKS_LISTED

PROGRESS_WRITE_S = 1.0  # journal a task's progress at most this often
PROGRESS_EVENT_S = 5.0  # and announce it as an event at most this often
UNJOURNALED_KEPT = 100
JOURNAL_WAIT_S = 10.0  # a journal write waits at most its busy timeout (5 s); this covers it


class Recorder:
    def __init__(self, shared: Shared) -> None:
        self.journal = shared.journal
        self.events = shared.events
        self.runtime = shared.runtime
        self.instance_id = shared.instance_id
        self.unjournaled: dict[str, Call] = {}  # ended calls whose end the journal could not take

    def __repr__(self) -> str:
        return f"<Recorder unjournaled={len(self.unjournaled)}>"

    async def promote(self, call: Call) -> None:
        """Make the call a task by journaling its working row.

        Idempotent, and used from both sides: the host's waiter (timeout, or a question for the
        client) and the call itself (a 2026-07-28 round, whose state needs the row). Whoever moves
        the call writes the row; anyone else waits for that write, bounded.
        """
        if call.move(CallState.PROMOTED):
            with anyio.CancelScope(shield=True):
                try:
                    await self.journal.run(self.journal.sync.tasks.insert, task_row(call, self.instance_id))
                except EmceepeeError as exc:  # the call runs on; this process keeps its task in memory
                    call.unjournaled = exc
                    self.runtime.journal_failed(exc)
                finally:
                    call.row_written.set()  # even if the write failed: nobody may wait on it forever
        elif call.state == CallState.PROMOTED:
            with anyio.move_on_after(JOURNAL_WAIT_S):
                await call.row_written.wait()

    async def progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        """The backend's progress: to the host that waits (if it asked), to the journal, as an event."""
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
            state = call.progress
            await self.runtime.guarded(
                lambda: self.journal.run(
                    self.journal.sync.tasks.update_progress, call.call_id, state, message
                )
            )
            if now - call.progress_announced >= PROGRESS_EVENT_S:
                call.progress_announced = now
                self.events.emit("task_progress", call.server, {"task_id": call.call_id, **call.progress})

    async def kept(self, task_id: str) -> Passed:
        """A result journaled as the host's bytes (`_finish`, store/tables/results.py), read back within
        the result budget (calls/spool.py), for the reply to write as it is."""
        size = await self.journal.run(self.journal.sync.results.kept_size, task_id)
        gone = NotFound(f"Task {task_id}'s result is no longer kept.", hint=TASKS_LISTED)
        if size is None:
            raise gone
        try:
            held = await spool.BUDGET.hold_read(
                size, lambda sink: self.journal.run(self.journal.sync.results.read_kept, task_id, sink)
            )
        except LookupError:
            raise gone from None
        return Passed(held)

    async def finished(self, call: Call) -> None:
        """Journal the end of a promoted call (waiting, bounded, for its promotion's write)."""
        with anyio.move_on_after(JOURNAL_WAIT_S):
            await call.row_written.wait()
        await self.runtime.guarded(lambda: self._finish(call))

    async def _finish(self, call: Call) -> None:
        end = call.end
        assert end is not None, call  # a call is finished once it says how it ended
        status, error = end.status, end.error.message if end.error else None
        result = None
        if isinstance(end, Returned):
            result = end.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        body = (
            end.body if isinstance(end, ReturnedRaw) else None
        )  # the host's bytes (store/tables/results.py)
        tasks = self.journal.sync.tasks
        try:
            ended = await self.journal.run(
                tasks.finish, call.call_id, status, result=result, error=error, body=body
            )
            if not ended and await self.journal.run(tasks.row, call.call_id, whole=False) is None:
                # Its promotion could not be journaled: write it now, ended, so the result is kept.
                if isinstance(call.end, ReturnedRaw):
                    as_model(call)
                await self.journal.run(tasks.insert, final_row(call, self.instance_id))
                ended = True
            self._drop_raw(call)
        except EmceepeeError as exc:
            # The journal cannot take it: keep the outcome in memory, so this process can still
            # hand it over (a restart would lose it, and the model was told so at promotion).
            if isinstance(call.end, ReturnedRaw):
                as_model(call)
            call.unjournaled = exc
            self.unjournaled[call.call_id] = call
            while len(self.unjournaled) > UNJOURNALED_KEPT:
                self.unjournaled.pop(next(iter(self.unjournaled)))
            self.runtime.journal_failed(exc)
            ended = True
        if ended:
            data = {"task_id": call.call_id, "tool": call.tool, "status": status.value}
            self.events.emit("task_status", call.server, {**data, **({"error": error} if error else {})})

    def _drop_raw(self, call: Call) -> None:
        """A raw result is journaled (or the task's row already held another end): it is read back
        from there (`kept`), not held."""
        raw = call.end
        if not isinstance(raw, ReturnedRaw):
            return
        raw.body.release()
        call.reform(KeptRaw(raw.preview))
        spool.give_back(raw.body.size)
