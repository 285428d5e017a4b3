"""Events (category 1): journaled, delivered to the host exactly once, the wake-up for await_activity.

An event is something the model should hear about without asking: a task finished, a backend
connected or died, a backend's list changed or a resource was updated, a question arrived.
Logs are not events (they are on demand, through get_logs) and never wake anything.

Delivery is exactly once per host session (one `serve` process is one host session): `take()`
hands over what is not yet delivered, oldest first, and records the cursor in the journal (the
last of this session's own events delivered). A host that lost a reply asks again with the last
event id it saw: `since()` reads the events delivered after it back from the journal. What a
session that ended never delivered is claimed by the next `serve` to start (`replay()`), and
delivered once more, marked `replayed`.

Every `await_activity` waiting wakes when an event arrives, however many wait at once; the
first reply to take it carries it, and the others hear that it went elsewhere (session/activity.py).

A backend cannot make this grow without bound. An event emitted with a `coalesce` key that
matches one still undelivered is counted on it (`data.count`) instead of added. At most
`EVENTS_KEPT` wait undelivered: past that the oldest are dropped (the journal still has them)
and the next `take()` starts with an `events_dropped` event that says how many. One `take()`
hands over at most `EVENTS_PER_REPLY`; the rest wait for the next reply.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, ParamSpec

import anyio

from emceepee_cli.clock import now_iso
from emceepee_cli.ids import new_id
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import Event, OwnedEvent

EVENTS_KEPT = 1000
EVENTS_PER_REPLY = 100
WRITTEN_WAIT_S = 10.0  # for a read back, how long the writes it may need are waited for

P = ParamSpec("P")


class Events:
    def __init__(self, instance_id: str, journal: AsyncJournal, runtime: Runtime) -> None:
        self.instance_id = instance_id
        self.journal = journal
        self.runtime = runtime
        self._undelivered: deque[Event] = deque()
        self._coalescing: dict[str, Event] = {}  # key -> the undelivered event repeats count on
        self._keys: dict[str, str] = {}  # event_id -> its coalescing key
        self._dropped = 0
        self._arrived = anyio.Event()
        self._arrivals = 0  # events emitted, counted on or replayed so far: what a waiter watches
        self.handed_out = 0  # events handed over so far, by any reply
        self._unwritten = 0  # journal writes started and not yet ended
        self._written = anyio.Event()
        self.delivered: str | None = None  # the last of this session's own events handed over

    def __repr__(self) -> str:
        return f"<Events undelivered={len(self._undelivered)} dropped={self._dropped}>"

    def emit(
        self, type_: str, server: str | None, data: dict[str, Any], coalesce: str | None = None
    ) -> Event:
        same = self._coalescing.get(coalesce) if coalesce is not None else None
        if same is not None:
            same["data"]["count"] = same["data"].get("count", 1) + 1
            self._wake()
            return same
        event = Event(event_id=new_id(), type=type_, server=server, created_at=now_iso(), data=data)
        if len(self._undelivered) >= EVENTS_KEPT:
            self._forget(self._undelivered.popleft())
            self._dropped += 1
        self._undelivered.append(event)
        if coalesce is not None:
            self._coalescing[coalesce] = event
            self._keys[event["event_id"]] = coalesce
        self._write(self.journal.sync.events.add, self._owned(event))
        self._wake()
        return event

    def waiting(self) -> bool:
        return bool(self._undelivered) or bool(self._dropped)

    def take(self, limit: int = EVENTS_PER_REPLY) -> list[Event]:
        """Up to `limit` undelivered events, oldest first; each is handed out once."""
        taken: list[Event] = []
        if self._dropped:
            taken.append(self._dropped_note())
        while self._undelivered and len(taken) < limit:
            event = self._undelivered.popleft()
            self._forget(event)
            if event["data"].get("count", 1) > 1:  # journaled with the count it had then
                self._write(self.journal.sync.events.update_data, event["event_id"], event["data"])
            taken.append(event)
        self.handed_out += len(taken)
        own = [e["event_id"] for e in taken if not e.get("replayed")]
        if own:
            self.delivered = own[-1]
            self._write(self.journal.sync.events.set_cursor, self.instance_id, self.delivered)
        if self._undelivered:  # held back, not lost: say so, so the model knows to ask again
            taken.append(self._waiting_note())
        return taken

    def replay(self, events: list[Event]) -> None:
        """Deliver, before anything new, the events a session that ended never delivered."""
        self._undelivered.extendleft(reversed(events))
        if events:
            self._wake()

    async def since(self, event_id: str, limit: int = EVENTS_PER_REPLY) -> list[Event]:
        """This session's events delivered after `event_id`, read back from the journal."""
        if self.delivered is None or event_id >= self.delivered:
            return []
        await self.written(WRITTEN_WAIT_S)
        return await self.journal.run(
            self.journal.sync.events.between, self.instance_id, event_id, self.delivered, limit
        )

    async def wait(self, timeout_s: float) -> bool:
        """Wait (bounded) until an event is undelivered or one arrived since the wait began; True if so.

        An event that arrived meanwhile may already be gone: every waiter wakes, and the reply
        that takes first carries it. The others must not sleep on past it (`activity.py` says
        where it went)."""
        began = self._arrivals
        with anyio.move_on_after(timeout_s):
            while not self.waiting() and self._arrivals == began:
                await self._arrived.wait()
        return self.waiting() or self._arrivals != began

    @property
    def arrivals(self) -> int:
        """How many events were emitted, counted on or replayed so far: what a watcher compares."""
        return self._arrivals

    async def arrival(self, since: int, timeout_s: float) -> None:
        """Wait (bounded) until an event arrives after `since` (an earlier `arrivals`), delivered or not."""
        with anyio.move_on_after(timeout_s):
            while self._arrivals == since:
                await self._arrived.wait()

    async def written(self, timeout_s: float) -> None:
        """Wait (bounded) until the journal writes started so far have ended."""
        with anyio.move_on_after(timeout_s):
            while self._unwritten:
                await self._written.wait()

    def _write(self, fn: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
        """A journal write nobody waits for (still in order, on the journal's one thread)."""
        self._unwritten += 1

        async def write() -> None:
            try:
                await self.runtime.guarded(lambda: self.journal.run(fn, *args, **kwargs))
            finally:
                self._unwritten -= 1
                if not self._unwritten:
                    self._written.set()
                    self._written = anyio.Event()

        self.runtime.spawn(write, name=f"journal {fn.__qualname__}")

    def _owned(self, event: Event) -> OwnedEvent:
        """The event as journaled; its data is the same dict, so the count it has when written is kept."""
        return OwnedEvent(**event, instance_id=self.instance_id)

    def _wake(self) -> None:
        self._arrivals += 1
        self._arrived.set()
        self._arrived = anyio.Event()

    def _forget(self, event: Event) -> None:
        key = self._keys.pop(event["event_id"], None)
        if key is not None and self._coalescing.get(key) is event:
            del self._coalescing[key]

    def _waiting_note(self) -> Event:
        data = {
            "count": len(self._undelivered),
            "hint": f"at most {EVENTS_PER_REPLY} events come with one reply; the next reply "
            "(await_activity, or any tool) brings these",
        }
        return Event(event_id=new_id(), type="events_waiting", server=None, created_at=now_iso(), data=data)

    def _dropped_note(self) -> Event:
        count, self._dropped = self._dropped, 0
        data = {
            "count": count,
            "reason": f"more than {EVENTS_KEPT} events waited undelivered; the oldest were dropped "
            "(the journal keeps them)",
        }
        event = Event(event_id=new_id(), type="events_dropped", server=None, created_at=now_iso(), data=data)
        self._write(self.journal.sync.events.add, self._owned(event))
        return event
