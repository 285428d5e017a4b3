"""Background work in `serve`: the one guard every task started outside a request goes through.

Whatever a background task raises is logged with its traceback and never takes `serve` (or any
other call) down. A journal that fails (locked too long, a full disk) fails every write, ten
times a second from the watcher alone: the same failure is logged again only every
`JOURNAL_ERROR_EVERY_S`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVarTuple

import anyio.abc

from emceepee_cli.errors import EmceepeeError
from emceepee_cli.store.aio import AsyncJournal

log = logging.getLogger(__name__)

JOURNAL_ERROR_EVERY_S = 30.0
JOURNAL_ERRORS_KEPT = 100  # distinct messages remembered for the rate limit

P = ParamSpec("P")
Ts = TypeVarTuple("Ts")


class Runtime:
    def __init__(self, task_group: anyio.abc.TaskGroup) -> None:
        self.task_group = task_group
        self._journal_errors: dict[str, float] = {}  # message -> when last logged

    def __repr__(self) -> str:
        return f"<Runtime journal_errors={len(self._journal_errors)}>"

    def spawn(self, fn: Callable[[*Ts], Awaitable[object]], *args: *Ts, name: str) -> None:
        """Run `fn(*args)` in the background, under the guard."""
        self.task_group.start_soon(_guard, fn, args, name, name=name)

    async def guarded(self, work: Callable[[], Awaitable[object]]) -> None:
        """Journal work: a failure (a journal locked too long) is logged, never fatal."""
        try:
            await work()
        except EmceepeeError as exc:
            self.journal_failed(exc)

    def write(
        self,
        journal: AsyncJournal,
        fn: Callable[P, object],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> None:
        """A journal write nobody waits for; still in order, on the journal's one thread."""

        async def work() -> None:
            await journal.run(fn, *args, **kwargs)

        self.spawn(self.guarded, work, name=f"journal {getattr(fn, '__qualname__', 'write')}")

    def journal_failed(self, exc: EmceepeeError) -> None:
        """Log a journal failure; the same one again only every JOURNAL_ERROR_EVERY_S."""
        now = time.monotonic()
        last = self._journal_errors.get(exc.message)
        if last is not None and now - last < JOURNAL_ERROR_EVERY_S:
            return
        if len(self._journal_errors) > JOURNAL_ERRORS_KEPT:
            self._journal_errors.clear()
        self._journal_errors[exc.message] = now
        log.error("journal: %s", exc)


async def _guard(fn: Callable[[*Ts], Awaitable[object]], args: tuple[*Ts], name: str) -> None:
    try:
        await fn(*args)
    except Exception:
        log.exception("background work '%s' failed; serve carries on", name)
