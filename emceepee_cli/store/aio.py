"""The journal for the event loop: every call runs on one worker thread, in order.

`await journal.run(journal.sync.tasks.insert, row)` runs `journal.sync.tasks.insert(row)` on that
thread: the method is named, not spelled as a string, so the checkers see its arguments and its
result, and a rename fails where it is made. The arguments are taken when `run` is called; the
method runs later, on that thread: the only one that uses `journal.sync` while `serve` runs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread

from emceepee_cli.errors import JournalError
from emceepee_cli.store.db import close_quietly
from emceepee_cli.store.journal import Journal

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger(__name__)


class AsyncJournal:
    SHUTDOWN_S = 8.0  # a write waits up to BUSY_TIMEOUT_MS for a lock; this covers it

    def __init__(self, journal: Journal) -> None:
        self.sync = journal
        self._limiter = anyio.CapacityLimiter(1)

    def __repr__(self) -> str:
        return f"<AsyncJournal {self.sync!r}>"

    @property
    def fault(self) -> JournalError | None:
        """Why this journal is kept in memory rather than in its file; None while it is in its file."""
        return self.sync.fault

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` — a method of `self.sync` or of one of its parts — on the journal's
        one worker thread."""
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def shutdown(self, instance_id: str, bound_s: float = SHUTDOWN_S) -> None:
        """Record that this instance stopped, and close: bounded, and never raising. At shutdown a
        journal that cannot be written (a full disk, a lost file) is an error in the log, not a crash."""

        def stop() -> None:
            try:
                self.sync.instances.stop(instance_id)
            except JournalError as exc:
                log.error("journal: could not record that this emceepee stopped: %s", exc.message)
            problem = close_quietly(self.sync.db)
            if problem:
                log.error("journal: could not close %s cleanly: %s", self.sync.path, problem)

        with anyio.CancelScope(shield=True), anyio.move_on_after(bound_s) as waited:
            await anyio.to_thread.run_sync(stop, limiter=self._limiter, abandon_on_cancel=True)
        if waited.cancelled_caught:
            log.error(
                "journal: %s still busy after %.0f s at shutdown; stopping without it",
                self.sync.path,
                bound_s,
            )
