"""`await_activity`: wait for the first event (or a timeout), then say what is going on.

The reply carries the events (each delivered once), the calls still working (category 3) and the
questions waiting on the client (category 4), whatever woke it, and `last_event_id`: the last
event this session delivered. A host that lost a reply passes it back as `since_event_id`, and
the events delivered after it come again first (read from the journal, at most a reply's worth:
when that many come back, `last_event_id` is the last of them and new events wait).

Several calls may wait at once (a host that runs tool calls in parallel). An event wakes all of
them and goes, once, with whichever reply takes it first — another `await_activity`, or any tool's
envelope. A waiter woken to find its events gone returns at once all the same, with the trigger
`delivered_elsewhere`: how many were handed over while it waited and, when known, the
`since_event_id` that reads them again. No waiter sleeps on while an event it never saw exists.
"""

from __future__ import annotations

from typing import Any

from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.events import EVENTS_PER_REPLY, Events
from emceepee_cli.questions.questions import Questions
from emceepee_cli.store.records import Event


async def await_activity(
    events: Events,
    tasks: Tasks,
    questions: Questions,
    timeout_ms: int,
    max_wait_ms: int,
    since_event_id: str | None = None,
) -> dict[str, Any]:
    again = await events.since(since_event_id) if since_event_id else []
    before, handed = events.delivered, events.handed_out
    if again or events.waiting():
        triggers: list[dict[str, Any]] = [{"type": "immediate"}]
    else:
        await events.wait(min(timeout_ms, max_wait_ms) / 1000)
        triggers = []
    full = len(again) >= EVENTS_PER_REPLY
    taken = [*again, *([] if full else events.take(EVENTS_PER_REPLY - len(again)))]
    if not triggers:
        triggers = _woken_by(taken) or _elsewhere(events.handed_out - handed, before) or [{"type": "timeout"}]
    return {
        "triggers": triggers,
        "events": taken,
        "pending_server": tasks.working(),
        "pending_client": {"elicitations": [], "sampling_requests": [], **questions.for_client()},
        "last_event_id": again[-1]["event_id"] if full else events.delivered,
    }


def _woken_by(taken: list[Event]) -> list[dict[str, Any]]:
    seen = {(e["type"], e["server"]) for e in taken}
    return [{"type": "event", "event_type": t, "server": srv} for t, srv in sorted(seen, key=str)]


def _elsewhere(count: int, before: str | None) -> list[dict[str, Any]]:
    """The trigger of a waiter whose events another reply, made meanwhile, carried (if any did)."""
    if count <= 0:
        return []
    trigger: dict[str, Any] = {"type": "delivered_elsewhere", "count": count}
    if before is not None:
        trigger["since_event_id"] = before
    return [trigger]
