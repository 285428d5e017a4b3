"""The journal watcher: serve's housekeeping, ten times a second.

Each tick keeps the journal file (re-created if it was deleted under us), notices what other
processes wrote (a CLI cancel or answer; a sweep that took this process for dead and settled its
rows, which are taken back), expires calls and questions past their time, beats the heartbeat
and, now and then, purges what has outlived the retention. A tick that fails (a journal locked
too long) is logged and the next one tries again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import anyio

from emceepee_cli.core.questions import Questions
from emceepee_cli.core.runtime import Runtime
from emceepee_cli.core.tasks import Tasks
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.instances import heartbeat_s
from emceepee_cli.store.journal import Journal

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.1  # how soon a cancel or an answer written by the CLI is noticed
PURGE_EVERY_S = 3600.0


@dataclass
class _Clock:
    """When the watcher last saw the journal change, beat, and purged."""

    version: int | None
    beat: float
    purge: float


class Watcher:
    def __init__(
        self,
        journal: AsyncJournal,
        runtime: Runtime,
        tasks: Tasks,
        questions: Questions,
        instance_id: str,
        retention_s: float,
    ) -> None:
        self.journal = journal
        self.runtime = runtime
        self.tasks = tasks
        self.questions = questions
        self.instance_id = instance_id
        self.retention_s = retention_s
        self._scope = anyio.CancelScope()

    def __repr__(self) -> str:
        return f"<Watcher {self.instance_id}>"

    async def run(self) -> None:
        """Tick until `stop()`."""
        with self._scope:
            now = anyio.current_time()
            clock = _Clock(version=None, beat=now, purge=now)
            while True:
                await self.runtime.guarded(lambda: self.tick(clock))
                await anyio.sleep(WATCH_INTERVAL_S)

    def stop(self) -> None:
        self._scope.cancel()

    async def tick(self, clock: _Clock) -> None:
        now = anyio.current_time()
        recreated = await self.journal.run(Journal.recover)
        if recreated:
            log.error("journal: %s", recreated)
        current = await self.journal.run(Journal.data_version)
        if current != clock.version:  # another process wrote: a CLI cancel or answer, perhaps
            clock.version = current
            await self.reclaim()
            await self.tasks.cancel_requested()
            await self.questions.sync()
        await self.tasks.expire_due()
        await self.questions.expire_due()
        if now - clock.beat >= heartbeat_s():
            clock.beat = now
            await self.journal.run(Journal.heartbeat, self.instance_id)
        if now - clock.purge >= PURGE_EVERY_S:
            clock.purge = now
            await self.journal.run(Journal.purge_finished, self.retention_s)

    async def reclaim(self) -> None:
        """Take back this process's calls and questions that another process settled, believing it
        had stopped (an older emceepee, or a CLI on another machine, going by a stale heartbeat)."""
        calls, asked = self.tasks.promoted(), self.questions.unanswered()
        if not calls and not asked:
            return
        restored = await self.journal.run(Journal.reclaim, self.instance_id, calls, asked)
        if restored:
            log.warning(
                "journal: another process marked %d call(s)/question(s) of this running emceepee (pid %d) "
                "as interrupted, taking it for stopped; they are working again: %s",
                len(restored),
                os.getpid(),
                ", ".join(restored),
            )
