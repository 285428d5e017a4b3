"""Events: repeats are counted on one event, the undelivered queue and each reply are bounded,
and every event is journaled under its instance, with the cursor at the last one delivered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from emceepee_cli.events import EVENTS_KEPT, EVENTS_PER_REPLY, Events
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import Event

pytestmark = pytest.mark.anyio

WRITTEN_S = 20.0


@asynccontextmanager
async def events(tmp_path: Path) -> AsyncIterator[tuple[Events, Journal]]:
    """An Events queue on a real journal file, writing through a real task group."""
    journal = Journal(tmp_path / "journal.db")
    async with anyio.create_task_group() as tg:
        yield Events("INSTANCE", AsyncJournal(journal), Runtime(tg)), journal


def journaled(journal: Journal) -> list[dict[str, object]]:
    return list(journal.db.query("SELECT * FROM events ORDER BY event_id"))


def cursor(journal: Journal) -> str | None:
    row = journal.db.execute("SELECT last_event_id FROM cursors WHERE session_id = 'INSTANCE'").fetchone()
    return None if row is None else str(row[0])


async def test_repeats_of_one_notification_are_counted_on_one_event(tmp_path: Path) -> None:
    async with events(tmp_path) as (queue, journal):
        for _ in range(10000):
            queue.emit("notification", "h", {"method": "m", "params": {}}, coalesce="h/m/{}")
        queue.emit("notification", "h", {"method": "other", "params": {}}, coalesce="h/other/{}")
        taken = queue.take()
        await queue.written(WRITTEN_S)
        rows = journaled(journal)
        queue.emit("notification", "h", {"method": "m", "params": {}}, coalesce="h/m/{}")
        again = queue.take()
    assert [(e["data"]["method"], e["data"].get("count", 1)) for e in taken] == [("m", 10000), ("other", 1)]
    assert [(r["event_id"], r["instance_id"]) for r in rows] == [(e["event_id"], "INSTANCE") for e in taken]
    assert json.loads(str(rows[0]["data"]))["count"] == 10000  # the count it had when delivered
    assert cursor(journal) == again[0]["event_id"]
    assert again[0]["data"].get("count", 1) == 1  # once delivered, a repeat is news again


async def test_the_undelivered_queue_drops_its_oldest_and_says_how_many(tmp_path: Path) -> None:
    async with events(tmp_path) as (queue, journal):
        for n in range(EVENTS_KEPT + 500):
            queue.emit("task_status", "h", {"n": n})
        first = queue.take()
        *first, note = first
        rest = []
        while queue.waiting():
            batch = [e for e in queue.take() if e["type"] != "events_waiting"]
            assert len(batch) <= EVENTS_PER_REPLY
            rest += batch
        await queue.written(WRITTEN_S)
        rows = journaled(journal)
    assert len(first) == EVENTS_PER_REPLY
    assert first[0]["type"] == "events_dropped" and first[0]["data"]["count"] == 500
    assert first[1]["data"] == {"n": 500}
    assert note["type"] == "events_waiting" and note["data"]["count"] == EVENTS_KEPT - (EVENTS_PER_REPLY - 1)
    assert [e["data"]["n"] for e in first[1:] + rest] == list(range(500, EVENTS_KEPT + 500))
    # the journal keeps what memory dropped, and the note that says so; never the "waiting" notes
    assert len(rows) == EVENTS_KEPT + 500 + 1
    assert cursor(journal) == rest[-1]["event_id"]


async def test_replayed_events_come_first_once_and_leave_the_cursor_to_this_sessions_own(
    tmp_path: Path,
) -> None:
    async with events(tmp_path) as (queue, journal):
        own = queue.emit("server_connected", "h", {"status": "ready"})
        old = Event(event_id="0OLD", type="task_status", server="h", created_at="t", data={}, replayed=True)
        queue.replay([old])
        taken = queue.take()
        again = queue.take()
        await queue.written(WRITTEN_S)
    assert [e["event_id"] for e in taken] == ["0OLD", own["event_id"]] and again == []
    assert queue.delivered == own["event_id"] == cursor(journal)
    assert [r["event_id"] for r in journaled(journal)] == [
        own["event_id"]
    ]  # the old one is not journaled twice


async def test_since_reads_back_what_this_session_delivered_after_an_id(tmp_path: Path) -> None:
    async with events(tmp_path) as (queue, _):
        sent = [queue.emit("task_status", "h", {"n": n}) for n in range(5)]
        assert await queue.since(sent[0]["event_id"]) == []  # nothing delivered yet
        queue.take()
        queue.emit("task_status", "h", {"n": 5})  # not delivered: not read back
        back = await queue.since(sent[1]["event_id"])
        nothing = await queue.since(sent[4]["event_id"])
    assert [e["data"] for e in back] == [{"n": 2}, {"n": 3}, {"n": 4}]
    assert nothing == []
