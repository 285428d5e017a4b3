"""`await_activity`: wait for the first event (or a timeout), then say what is going on.

The reply carries the events (each delivered once), the calls still working (category 3) and the
questions waiting on the client (category 4), whatever woke it.
"""

from __future__ import annotations

from typing import Any

from emceepee_cli.core.events import Events
from emceepee_cli.core.questions import Questions
from emceepee_cli.core.tasks import Tasks


async def await_activity(
    events: Events, tasks: Tasks, questions: Questions, timeout_ms: int, max_wait_ms: int
) -> dict[str, Any]:
    if events.waiting():
        triggers: list[dict[str, Any]] = [{"type": "immediate"}]
    else:
        await events.wait(min(timeout_ms, max_wait_ms) / 1000)
        triggers = []
    taken = events.take()
    if not triggers:
        seen = {(e["type"], e["server"]) for e in taken}
        triggers = [
            {"type": "event", "event_type": t, "server": srv} for t, srv in sorted(seen, key=str)
        ] or [{"type": "timeout"}]
    return {
        "triggers": triggers,
        "events": taken,
        "pending_server": tasks.working(),
        "pending_client": {"elicitations": [], "sampling_requests": [], **questions.for_client()},
    }
