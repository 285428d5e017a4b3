"""A call recorded as a task: its working row when promoted, its progress, and its end.

A journal that cannot take a row does not stop the call: the task is kept in memory instead
(`Call.unjournaled`, and the last `UNJOURNALED_KEPT` ended ones in `unjournaled`), so this process
can still hand its result over; the model is told a restart would lose it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from emceepee_cli.calls import spool
from emceepee_cli.calls.call import Call, CallState, as_model, final_row, task_row
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.events import Events
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import TaskStatus

PROGRESS_WRITE_S = 1.0  # journal a task's progress at most this often
PROGRESS_EVENT_S = 5.0  # and announce it as an event at most this often
UNJOURNALED_KEPT = 100
JOURNAL_WAIT_S = 10.0  # a journal write waits at most its busy timeout (5 s); this covers it


class Recorder:
    def __init__(self, journal: AsyncJournal, events: Events, runtime: Runtime, instance_id: str) -> None:
        self.journal = journal
        self.events = events
        self.runtime = runtime
        self.instance_id = instance_id
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

    async def finished(self, call: Call) -> None:
        """Journal the end of a promoted call (waiting, bounded, for its promotion's write)."""
        with anyio.move_on_after(JOURNAL_WAIT_S):
            await call.row_written.wait()
        await self.runtime.guarded(lambda: self._finish(call))

    async def _finish(self, call: Call) -> None:
        result: dict[str, Any] | None = None
        if call.raw is not None:  # the host's bytes, journaled as they are (store/tables/results.py)
            status, error = TaskStatus.COMPLETED, None
        elif call.result is not None:
            status, error = TaskStatus.COMPLETED, None
            result = call.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            status = call.stop_as or TaskStatus.FAILED
            error = call.error.message if call.error else None
        tasks = self.journal.sync.tasks
        try:
            ended = await self.journal.run(
                tasks.finish, call.call_id, status, result=result, error=error, body=call.raw
            )
            if not ended and await self.journal.run(tasks.row, call.call_id, whole=False) is None:
                # Its promotion could not be journaled: write it now, ended, so the result is kept.
                if call.raw is not None:
                    as_model(call)
                await self.journal.run(tasks.insert, final_row(call, self.instance_id))
                ended = True
            self._drop_raw(call, ended)
        except EmceepeeError as exc:
            # The journal cannot take it: keep the outcome in memory, so this process can still
            # hand it over (a restart would lose it, and the model was told so at promotion).
            if call.raw is not None:
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

    def _drop_raw(self, call: Call, journaled: bool) -> None:
        """A raw result is journaled: it is read back from there (calls/tasks.py), not held."""
        if call.raw is None:
            return
        size = call.raw.size
        call.raw.release()
        call.raw, call.raw_kept = None, journaled
        spool.give_back(size)
