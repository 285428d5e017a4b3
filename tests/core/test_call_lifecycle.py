"""The call lifecycle: one state machine, idempotent promotion, and no shielded wait without a bound."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from emceepee_cli.calls import spool
from emceepee_cli.calls.call import CALL_TRANSITIONS, Call, CallState, as_model, final_row
from emceepee_cli.calls.end import Failed, Returned, ReturnedRaw, Stopped
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.store.records import BadTransition, PendingRow, TaskStatus
from emceepee_cli.store.tables.pending import Pending
from tests.support import emceepee, example_table, payload, write_config

GATE_S = 10.0


@pytest.mark.anyio
async def test_a_call_moves_only_along_its_transition_table() -> None:
    call = Call("srv", "tool", {}, ttl_s=60)
    assert call.state == CallState.RUNNING and not call.promoted
    assert call.move(CallState.PROMOTED) is True
    assert call.move(CallState.PROMOTED) is False  # promotion is idempotent
    with pytest.raises(BadTransition):
        call.move(CallState.ANSWERED)  # a task never goes back to being a plain answer
    call.conclude(Returned(types.CallToolResult(content=[])))
    assert call.close() == CallState.FINISHED and call.ended and call.promoted
    with pytest.raises(BadTransition):
        call.move(CallState.PROMOTED)
    quick = Call("srv", "tool", {}, ttl_s=60)
    quick.conclude(Failed(EmceepeeError("it failed")))
    assert quick.close() == CallState.ANSWERED and not quick.promoted
    assert set(CALL_TRANSITIONS) | {s for moves in CALL_TRANSITIONS.values() for s in moves} == set(CallState)


@pytest.mark.anyio
async def test_a_call_says_once_how_it_ended_and_only_a_raw_result_changes_form(tmp_path: Path) -> None:
    call = Call("srv", "tool", {}, ttl_s=60)
    with pytest.raises(BadTransition):
        call.close()  # no end state before it says how it ended
    stopped = Stopped(TaskStatus.CANCELLED, EmceepeeError("it was cancelled"))
    call.conclude(stopped)
    with pytest.raises(BadTransition):
        call.conclude(Returned(types.CallToolResult(content=[])))  # a second end is a bug
    with pytest.raises(BadTransition):
        call.reform(Returned(types.CallToolResult(content=[])))  # only a raw result changes form
    assert call.end is stopped and final_row(call, "i")["status"] == "cancelled"
    with pytest.raises(ValueError):
        Stopped(TaskStatus.FAILED, EmceepeeError("not a stop"))
    budget = spool.Budget(1024, tmp_path)
    raw = Call("srv", "tool", {}, ttl_s=60)
    raw.conclude(ReturnedRaw(await budget.hold(b'{"content":[],"isError":false}'), ""))
    assert budget.held > 0
    as_model(raw)  # kept in memory: as a model, and its bytes go back to the budget
    assert isinstance(raw.end, Returned) and raw.end.result.is_error is False and budget.held == 0


@pytest.mark.anyio
async def test_every_move_wakes_whoever_waits_on_the_call() -> None:
    call = Call("srv", "tool", {}, ttl_s=60)
    before = call.wake
    call.move(CallState.PROMOTED)
    assert before.is_set() and not call.wake.is_set()


@pytest.mark.anyio
async def test_a_host_cancel_while_a_modern_round_is_journaled_ends_the_call_and_shutdown_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The round's question is being written when the host gives up: the call ends as cancelled."""
    entered, release = threading.Event(), threading.Event()
    insert = Pending.insert

    def gated(self: Pending, row: PendingRow) -> None:  # a slow disk, at the journal's own seam
        entered.set()
        release.wait(GATE_S)
        insert(self, row)

    monkeypatch.setattr(Pending, "insert", gated)
    config = write_config(tmp_path / "config.toml", example_table("modern", "modern.py", protocol="modern"))
    with anyio.fail_after(30):
        async with emceepee(config) as client:
            await client.call_tool("list_tools", {})
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    client.call_tool,
                    "execute_tool",
                    {"server": "modern", "tool": "book", "args": {"city": "Oslo"}},
                )
                assert await anyio.to_thread.run_sync(entered.wait, GATE_S)
                tg.cancel_scope.cancel()  # the host cancels execute_tool (a courtesy notifications/cancelled)
            await client.send_ping()  # the cancel notification was read before this answer
            release.set()
            ended = await until_task_status(client)
        # leaving the client closed serve: it did not wait forever on the cancelled call
    assert ended["status"] == "cancelled", ended


async def until_task_status(client: Client) -> dict[str, Any]:
    """The first task_status event (the caller bounds the wait)."""
    while True:
        activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
        for event in activity["events"]:
            if event["type"] == "task_status":
                return dict(event["data"])
