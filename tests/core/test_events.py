"""Events: repeats are counted on one event, the undelivered queue and each reply are bounded."""

from __future__ import annotations

from typing import Any

import pytest

from emceepee_cli.core.events import EVENTS_KEPT, EVENTS_PER_REPLY, Events

pytestmark = pytest.mark.anyio


def events() -> tuple[Events, list[tuple[str, Any]]]:
    persisted: list[tuple[str, Any]] = []
    return Events("instance", lambda fn, *args: persisted.append((fn.__name__, args))), persisted


async def test_repeats_of_one_notification_are_counted_on_one_event() -> None:
    queue, persisted = events()
    for _ in range(10000):
        queue.emit("notification", "h", {"method": "m", "params": {}}, coalesce="h/m/{}")
    queue.emit("notification", "h", {"method": "other", "params": {}}, coalesce="h/other/{}")
    taken = queue.take()
    assert [(e["data"]["method"], e["data"].get("count", 1)) for e in taken] == [("m", 10000), ("other", 1)]
    assert [m for m, _ in persisted].count("add_event") == 2
    assert ("update_event_data", (taken[0]["event_id"], taken[0]["data"])) in persisted
    queue.emit("notification", "h", {"method": "m", "params": {}}, coalesce="h/m/{}")
    assert queue.take()[0]["data"].get("count", 1) == 1  # once delivered, a repeat is news again


async def test_the_undelivered_queue_drops_its_oldest_and_says_how_many() -> None:
    queue, _ = events()
    for n in range(EVENTS_KEPT + 500):
        queue.emit("task_status", "h", {"n": n})
    first = queue.take()
    *first, note = first
    assert len(first) == EVENTS_PER_REPLY
    assert first[0]["type"] == "events_dropped" and first[0]["data"]["count"] == 500
    assert first[1]["data"] == {"n": 500}
    assert note["type"] == "events_waiting" and note["data"]["count"] == EVENTS_KEPT - (EVENTS_PER_REPLY - 1)
    rest = []
    while queue.waiting():
        batch = [e for e in queue.take() if e["type"] != "events_waiting"]
        assert len(batch) <= EVENTS_PER_REPLY
        rest += batch
    assert [e["data"]["n"] for e in first[1:] + rest] == list(range(500, EVENTS_KEPT + 500))
