"""Events (category 1): journaled, delivered to the host exactly once, the wake-up for await_activity.

An event is something the model should hear about without asking: a task finished, a backend
connected or died, a backend's list changed or a resource was updated, a question arrived.
Logs are not events (they are on demand, through get_logs) and never wake anything.

Delivery is exactly once per host session (one `serve` process is one host session): `take()`
hands over everything not yet delivered, in order, and records the cursor in the journal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from emceepee_cli.ids import new_id
from emceepee_cli.store.journal import now_iso


class Events:
    def __init__(self, instance_id: str, persist: Callable[[str, Any], None]) -> None:
        self.instance_id = instance_id
        self._persist = persist  # schedules a journal call: (method name, argument)
        self._undelivered: list[dict[str, Any]] = []
        self._arrived = anyio.Event()

    def __repr__(self) -> str:
        return f"<Events undelivered={len(self._undelivered)}>"

    def emit(self, type_: str, server: str | None, data: dict[str, Any]) -> dict[str, Any]:
        event = {"event_id": new_id(), "type": type_, "server": server, "created_at": now_iso(), "data": data}
        self._undelivered.append(event)
        self._persist("add_event", {**event, "instance_id": self.instance_id})
        self._arrived.set()
        self._arrived = anyio.Event()
        return event

    def waiting(self) -> bool:
        return bool(self._undelivered)

    def take(self) -> list[dict[str, Any]]:
        """Everything not yet delivered, oldest first; each event is handed out once."""
        taken, self._undelivered = self._undelivered, []
        if taken:
            self._persist("set_cursor", (self.instance_id, taken[-1]["event_id"]))
        return taken

    async def wait(self, timeout_s: float) -> bool:
        """Wait (bounded) for an undelivered event; True if there is one."""
        with anyio.move_on_after(timeout_s):
            while not self._undelivered:
                await self._arrived.wait()
        return bool(self._undelivered)
