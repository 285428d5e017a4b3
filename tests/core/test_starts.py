"""Start slots: at most `limit` backends boot at once; a wanted one does not queue; a slow start
gives its slot up after `hold_s`."""

from __future__ import annotations

import anyio
import pytest

from emceepee_cli.backends.start_limit import StartSlots

pytestmark = pytest.mark.anyio


async def test_a_third_start_waits_for_a_slot_and_a_wanted_one_does_not() -> None:
    slots = StartSlots(limit=2, hold_s=60)
    got: list[str] = []

    async def start(name: str, wanted: anyio.Event) -> None:
        await slots.take(name, wanted)
        got.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(start, name, anyio.Event())
            urgent = anyio.Event()
            tg.start_soon(start, "d", urgent)
            await anyio.wait_all_tasks_blocked()
            assert got == ["a", "b"]  # c and d queue
            urgent.set()
            await anyio.wait_all_tasks_blocked()
            assert got == ["a", "b", "d"]  # d is waited for: it starts at once, past the limit
            slots.release("a")
            slots.release("d")
            await anyio.wait_all_tasks_blocked()
    assert got == ["a", "b", "d", "c"]


async def test_a_slow_start_gives_its_slot_up_after_hold_s() -> None:
    slots = StartSlots(limit=1, hold_s=0.2)
    await slots.take("slow", anyio.Event())
    started = anyio.current_time()
    with anyio.fail_after(5):
        await slots.take("next", anyio.Event())  # nobody releases: the hold runs out
    assert anyio.current_time() - started >= 0.2
    slots.release("never held")  # a holder without a slot: nothing happens
