"""How long a call may run: its task TTL, stretched while it waits on a question; and the trace
a call leaves when the host stops waiting for it first.

A question parked for the user has its own timeout (`pending_timeout_ms`, 10 minutes by default),
longer than the task TTL (5 minutes): without this, the TTL would cancel the call, and its question
with it, before the documented time to answer had passed. So while a call waits on a question (its
own, or one only its server is known for), it lives until the last such question expires, plus
QUESTION_GRACE_S so that the question's own expiry is what ends it — never past task_ttl_max_ms.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import datetime

from emceepee_cli.calls.call import Call
from emceepee_cli.clock import now_iso
from emceepee_cli.events import Events
from emceepee_cli.store.records import QuestionJson

QUESTION_GRACE_S = 1.0
HOST_GAVE_UP = (
    "The host stopped waiting before the call ended (its own time limit, or a cancel), so the call "
    "was cancelled. Keep timeout_ms below the host's limit (about 60 s in Claude Desktop): then a slow "
    "call becomes a task instead."
)

log = logging.getLogger(__name__)


def extend_for_questions(call: Call, on_server: Iterable[QuestionJson], ttl_max_s: float) -> str | None:
    """Stretch `call`'s TTL over the questions on its server that may be its own; its new expiry
    (an ISO time), or None if none of them outlives its TTL."""
    asked = [q for q in on_server if q.get("task_id") in (None, call.call_id)]
    if not asked:
        return None
    last = max(datetime.fromisoformat(q["expires_at"]).timestamp() for q in asked)
    age = time.monotonic() - call.started
    ttl_s = min(age + (last - time.time()) + QUESTION_GRACE_S, ttl_max_s)
    if ttl_s <= call.ttl_s:
        return None
    call.ttl_s = ttl_s
    expires_at = now_iso(ttl_s - age)
    log.info("task %s waits on a question: it now expires at %s", call.call_id, expires_at)
    return expires_at


def host_gave_up(call: Call, events: Events) -> None:
    """A call the host cancelled before it ended (not promoted, so no task keeps it): a log line,
    and an event the next reply (or await_activity) carries, so the user can see what happened."""
    after_s = round(time.monotonic() - call.started, 1)
    log.warning(
        "the host cancelled execute_tool %s.%s after %.1f s; the backend call was cancelled%s",
        *(
            call.server,
            call.tool,
            after_s,
            " (it was waiting for the backend to start)" if call.awaiting_backend else "",
        ),
    )
    data: dict[str, object] = {"tool": call.tool, "after_s": after_s, "hint": HOST_GAVE_UP}
    if call.awaiting_backend:  # the call never reached the backend
        data["waiting_for"] = f"backend '{call.server}' to start"
    events.emit("call_cancelled_by_host", call.server, data)
