"""The watcher: its purge runs in the background, a batch at a time, so other journal work takes
turns; an idle serve reads the journal once a second, a busy one ten times."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

from emceepee_cli import seal
from emceepee_cli.calls.call import Call
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.config import Defaults
from emceepee_cli.session.watcher import IDLE_INTERVAL_S, Watcher, _Clock
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.retention import PURGE_BATCH
from tests.core.parts import Parts, parts
from tests.store.test_retention import DAY_S, old_rows

pytestmark = pytest.mark.anyio


def left(journal: Journal) -> int:
    """The rows still to purge."""
    sql = (
        "SELECT (SELECT count(*) FROM tasks) + (SELECT count(*) FROM events) + (SELECT count(*) FROM pending)"
    )
    return int(journal.db.execute(sql).fetchone()[0])


def purging_watcher(p: Parts, tmp_path: Path) -> Watcher:
    """A watcher over the parts' journal, keeping rows for a day."""
    shared = replace(p.shared, defaults=Defaults(retention_s=DAY_S))
    tasks = Tasks(
        shared,
        p.questions,
        backends=lambda server: None,  # no backends: this watcher's tasks are the journal's
        install_key=seal.install_key(tmp_path),
    )
    return Watcher(shared, tasks, p.questions)


@asynccontextmanager
async def journal_held(p: Parts) -> AsyncIterator[None]:
    """The journal's one worker kept busy until the block ends, so work queued meanwhile runs in
    the order it was queued (the worker takes its jobs first come, first served)."""
    gate, held = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        gate.wait(30)

    async with anyio.create_task_group() as tg:
        tg.start_soon(p.aio.run, hold)
        await anyio.to_thread.run_sync(held.wait, 30)
        try:
            yield
        finally:
            gate.set()


async def queued(p: Parts, jobs: int) -> None:
    """Until `jobs` wait for the journal's worker (the caller bounds the wait)."""
    while p.aio._limiter.statistics().tasks_waiting < jobs:
        await anyio.lowlevel.checkpoint()


async def test_a_purge_runs_in_batches_that_other_journal_work_interleaves_with(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        watcher = purging_watcher(p, tmp_path)
        old_rows(p.journal, PURGE_BATCH * 6, days_ago=2)
        total = left(p.journal)
        seen: list[int] = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                async with journal_held(p):
                    tg.start_soon(watcher.purge)
                    await queued(p, 1)  # its first batch is next
                for _ in range(3):  # each call waits for at most one batch, not for the whole purge
                    seen.append(await p.aio.run(left, p.aio.sync))
        assert total > seen[0] >= seen[1] >= seen[2] > 0
        assert left(p.journal) == 0 and not watcher._purging


async def test_stopping_the_watcher_stops_a_purge_between_batches(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        watcher = purging_watcher(p, tmp_path)
        old_rows(p.journal, PURGE_BATCH * 6, days_ago=2)
        total = left(p.journal)

        def stop_now() -> None:  # on the journal's worker, between two batches
            anyio.from_thread.run_sync(watcher.stop)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg, journal_held(p):
                tg.start_soon(watcher.purge)
                await queued(p, 1)  # its first batch is next
                tg.start_soon(p.aio.run, stop_now)  # and this right after that batch
                await queued(p, 2)
        assert total > left(p.journal) > 0  # it stopped after a batch; the rest waits for the next purge
        assert not watcher._purging


async def test_an_idle_watcher_reads_the_journal_once_a_second_and_a_busy_one_every_tick(
    tmp_path: Path,
) -> None:
    async with parts(tmp_path) as p:
        watcher = purging_watcher(p, tmp_path)
        now = anyio.current_time()
        clock = _Clock(version=None, beat=now, purge=now)  # no purge in this test
        other = sqlite3.connect(p.journal.path)  # another process's writes change the data version

        def written(n: int) -> None:
            other.execute(f"CREATE TABLE other_{n} (x)")
            other.commit()

        with anyio.fail_after(30):
            await watcher.tick(clock)
            first = clock.version
            written(1)
            clock.looked = anyio.current_time()  # it has just looked (however slow the first tick was)
            await watcher.tick(clock)
            assert clock.version == first  # idle, and it looked less than a second ago: not read
            own = Call("s", "t", None, ttl_s=60)
            watcher.tasks.driver.calls.add(own)
            await watcher.tick(clock)
            busy = clock.version
            assert busy != first  # with a call of its own, every tick reads it (a CLI cancel may be there)
            watcher.tasks.driver.calls.remove(own)
            written(2)
            assert clock.looked is not None
            clock.looked -= IDLE_INTERVAL_S  # a second later
            await watcher.tick(clock)
            assert clock.version != busy  # idle, once a second: a deleted journal, the heartbeat
        other.close()
