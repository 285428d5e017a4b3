"""How many backends boot at once.

A user with many servers starts them all with `serve`; on a small machine a hundred interpreters
booting together starve each other and serve itself, so the host's own `initialize` and
`tools/list` wait behind them. `StartSlots` lets `limit` backends boot at a time. A slot is held
from the spawn until the backend is ready or its start failed, and never longer than `hold_s`:
a slow start (a package download) is waiting, not working, and must not hold up the rest.

A backend someone is waiting for (a call, a listing) does not queue: it takes a slot at once,
beyond the limit, so a first call to the last configured server is bounded by that server's own
start.
"""

from __future__ import annotations

import os

import anyio

HOLD_S = 2.0  # the longest one start holds a slot


def default_limit() -> int:
    return max(4, 2 * (os.cpu_count() or 1))


class StartSlots:
    def __init__(self, limit: int | None = None, hold_s: float = HOLD_S) -> None:
        self.limit = limit if limit is not None else default_limit()
        self.hold_s = hold_s
        self._held: dict[object, float] = {}  # holder → when it took its slot
        self._changed = anyio.Event()

    def __repr__(self) -> str:
        return f"<StartSlots {len(self._held)}/{self.limit}>"

    async def take(self, holder: object, wanted: anyio.Event) -> None:
        """Wait for a slot; at once when `wanted` is set (someone waits for this backend)."""
        while True:
            now = anyio.current_time()
            for other, since in list(self._held.items()):
                if now - since >= self.hold_s:
                    del self._held[other]  # held long enough: its start is waiting, not working
            if len(self._held) < self.limit or wanted.is_set():
                self._held[holder] = now
                return
            soonest = min(self._held.values()) + self.hold_s - now
            with anyio.move_on_after(soonest):
                changed = self._changed
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_set_then_cancel, changed, tg.cancel_scope)
                    tg.start_soon(_set_then_cancel, wanted, tg.cancel_scope)

    def release(self, holder: object) -> None:
        """The holder is ready, or its start failed; a no-op when it holds no slot."""
        if self._held.pop(holder, None) is not None:
            self._changed.set()
            self._changed = anyio.Event()


async def _set_then_cancel(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
