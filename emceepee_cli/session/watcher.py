"""The journal watcher: serve's housekeeping, ten times a second while this process has a call or
a question of its own, and once a second while it has neither (nothing another process writes can
concern it then, and an idle serve should cost next to nothing).

Each tick keeps the journal file (re-created if it was deleted under us), notices what other
processes wrote (a CLI cancel or answer; a sweep that took this process for dead and settled its
rows, which are taken back), expires calls and questions past their time, beats the heartbeat
and, at start and then hourly, starts a purge of what has outlived the retention: in the
background, batch by batch (store/retention.py), so neither the ticks nor any call waits for it.
A tick that fails (a journal locked too long) is logged and the next one tries again.

`poke_all` has every watcher of the process look at the journal at once, busy or idle: the fleet
calls it when `emceepee answer` has written an answer (emceepee_cli/fleet/control.py), so the
waiting backend hears it without waiting for the next tick.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.questions.questions import Questions
from emceepee_cli.shared import Shared
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.tables.instances import heartbeat_s

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.1  # how soon a cancel or an answer written by the CLI is noticed
IDLE_INTERVAL_S = 1.0  # with no call and no question: a deleted journal, the heartbeat, the purge
PURGE_EVERY_S = 3600.0
PURGE_PAUSE_S = 0.005  # between batches: the journal's worker is free for a moment
INTERVAL_ENV = "EMCEEPEE_WATCH_INTERVAL_S"  # a test switch: a longer tick, to tell a poke from a tick

_WATCHING: weakref.WeakSet[Watcher] = weakref.WeakSet()  # the watchers running in this process


def watch_interval_s() -> float:
    return float(os.environ.get(INTERVAL_ENV) or WATCH_INTERVAL_S)


def poke_all() -> int:
    """Have every watcher running in this process look at the journal now; how many there are."""
    watchers = list(_WATCHING)
    for watcher in watchers:
        watcher.poke()
    return len(watchers)


@dataclass
class _Clock:
    """When the watcher last saw the journal change, beat, and purged."""

    version: int | None
    beat: float
    purge: float | None  # None: not yet in this run
    looked: float | None = None  # the last tick that read the journal


class Watcher:
    def __init__(self, shared: Shared, tasks: Tasks, questions: Questions) -> None:
        self.journal = shared.journal
        self.runtime = shared.runtime
        self.instance_id = shared.instance_id
        self.retention_s = shared.defaults.retention_s
        self.tasks = tasks
        self.questions = questions
        self._scope = anyio.CancelScope()
        self._purging = False
        self._purge_scope = anyio.CancelScope()
        self._poked: anyio.Event | None = None  # made in `run`, on the event loop

    def __repr__(self) -> str:
        return f"<Watcher {self.instance_id}>"

    async def run(self) -> None:
        """Tick until `stop()`."""
        with self._scope:
            now = anyio.current_time()
            clock = _Clock(version=None, beat=now, purge=None)
            self._poked = anyio.Event()
            _WATCHING.add(self)
            try:
                while True:
                    await self.runtime.guarded(lambda: self.tick(clock))
                    await self._rest(clock)
            finally:
                _WATCHING.discard(self)

    async def _rest(self, clock: _Clock) -> None:
        """Until the next tick: the interval, or a poke (the next tick then looks, idle or not)."""
        assert self._poked is not None
        with anyio.move_on_after(watch_interval_s()):
            await self._poked.wait()
        if self._poked.is_set():
            self._poked = anyio.Event()
            clock.looked = None

    def poke(self) -> None:
        """Look at the journal now, not at the next tick."""
        if self._poked is not None:
            self._poked.set()

    def stop(self) -> None:
        self._scope.cancel()
        self._purge_scope.cancel()

    async def tick(self, clock: _Clock) -> None:
        now = anyio.current_time()
        if not self.busy() and clock.looked is not None and now - clock.looked < self.idle_interval():
            return
        clock.looked = now
        recreated, current = await self.journal.run(_look, self.journal.sync)
        if recreated:
            log.error("journal: %s", recreated)
        if current != clock.version:  # another process wrote: a CLI cancel or answer, perhaps
            clock.version = current
            await self.reclaim()
            await self.tasks.cancel_requested()
            await self.questions.sync()
        await self.tasks.expire_due()
        await self.questions.expire_due()
        if now - clock.beat >= heartbeat_s():
            clock.beat = now
            await self.journal.run(self.journal.sync.instances.heartbeat, self.instance_id)
        if (clock.purge is None or now - clock.purge >= PURGE_EVERY_S) and not self._purging:
            clock.purge = now
            self._purging, self._purge_scope = True, anyio.CancelScope()
            self.runtime.spawn(self.purge, name="journal purge")

    def busy(self) -> bool:
        """This process has a call or an open question: what other processes write may concern it."""
        return bool(self.tasks.calls) or bool(self.questions.unanswered())

    @staticmethod
    def idle_interval() -> float:
        return min(IDLE_INTERVAL_S, heartbeat_s())

    async def purge(self) -> None:
        """Delete what outlived the retention and give the space back, one bounded batch at a time."""
        try:
            with self._purge_scope:
                deleted = await _repeat(
                    lambda: self.journal.run(self.journal.sync.retention.purge_batch, self.retention_s)
                )
                await _repeat(lambda: self.journal.run(self.journal.sync.retention.compact))
                if deleted:
                    log.info("journal: purged %d row(s) older than %d s", deleted, self.retention_s)
        except EmceepeeError as exc:
            self.runtime.journal_failed(exc)
        finally:
            self._purging = False

    async def reclaim(self) -> None:
        """Take back this process's calls and questions that another process settled, believing it
        had stopped (an older emceepee, or a CLI on another machine, going by a stale heartbeat)."""
        calls, asked = self.tasks.promoted(), self.questions.unanswered()
        if not calls and not asked:
            return
        restored = await self.journal.run(self.journal.sync.instances.reclaim, self.instance_id, calls, asked)
        if restored:
            log.warning(
                "journal: another process marked %d call(s)/question(s) of this running emceepee (pid %d) "
                "as interrupted, taking it for stopped; they are working again: %s",
                len(restored),
                os.getpid(),
                ", ".join(restored),
            )


def _look(journal: Journal) -> tuple[str | None, int]:
    """Re-create the journal file if it went (what happened, for the log), and its data version:
    one trip to the journal's thread per tick."""
    return journal.recover(), journal.data_version()


async def _repeat(step: Callable[[], Awaitable[int]]) -> int:
    """Run a bounded step until it finds nothing left to do, pausing between; the sum of what it did."""
    total = 0
    while done := await step():
        total += done
        await anyio.sleep(PURGE_PAUSE_S)
    return total
