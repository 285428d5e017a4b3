"""What stays bounded however a host uses `serve`: two waits at once both hear of an event, and
sixty parked questions do not make every reply carry sixty questions."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from tests.support import envelope, example_table, payload, run_cli, serving, until_ready, write_config

pytestmark = pytest.mark.anyio

WAIT_MS = 45_000  # what each await_activity asks for; the test bounds itself far below it
PARKED = 60


def size(reply: Any) -> int:
    """The bytes a host reads of a reply: every text block, and structuredContent."""
    texts = [block.text for block in reply.content if getattr(block, "type", "") == "text"]
    return sum(len(t.encode()) for t in texts) + len(json.dumps(reply.structured_content or {}).encode())


async def two_waits(client: Client, trigger: Callable[[], Awaitable[object]]) -> list[dict[str, Any]]:
    """Two await_activity calls waiting at once, then `trigger` (which makes an event); both replies.

    Both waits were written to serve's stdin before the ping's answer came back, so serve starts
    them before whatever `trigger` sends, whose event needs a round trip to another process."""
    replies: list[dict[str, Any]] = []

    async def wait() -> None:
        replies.append(payload(await client.call_tool("await_activity", {"timeout_ms": WAIT_MS})))

    with anyio.fail_after(10):  # far below WAIT_MS: neither wait may sleep to its timeout
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            tg.start_soon(wait)
            await client.send_ping()
            await trigger()
    return replies


def ended(task_id: str, replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task's status events the replies carried."""
    return [
        e
        for r in replies
        for e in r["events"]
        if e["type"] == "task_status" and e["data"]["task_id"] == task_id
    ]


def elsewhere(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in reply["triggers"] if t["type"] == "delivered_elsewhere"]


async def test_two_await_activity_calls_waiting_at_once_both_return_when_a_task_ends(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await until_ready(client, "echo")
            slow = {"server": "echo", "tool": "slow", "args": {"seconds": 600, "steps": 1}, "timeout_ms": 10}
            task_id = payload(await client.call_tool("execute_tool", slow))["proxy_task"]["task_id"]
            await client.call_tool("await_activity", {"timeout_ms": 0})  # what came so far, delivered

        async def cancel_at_a_terminal() -> None:  # another process: no reply of this session races
            done = await anyio.to_thread.run_sync(lambda: run_cli("tasks", "cancel", task_id))
            assert done.returncode == 0, done.stderr

        replies = await two_waits(client, cancel_at_a_terminal)
    assert [e["data"]["status"] for e in ended(task_id, replies)] == ["cancelled"]  # delivered once
    [carried] = [r for r in replies if r["events"]]
    [other] = [r for r in replies if not r["events"]]
    [gone] = elsewhere(other)  # woken all the same, and told where the event went
    assert gone["count"] == len(carried["events"]) and gone["since_event_id"] is not None


async def test_two_await_activity_calls_both_return_when_another_reply_takes_the_event(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await until_ready(client, "echo")
            await client.call_tool("await_activity", {"timeout_ms": 0})  # start-up events, delivered
        added: list[Any] = []

        async def add_tool() -> None:  # echo says its tools changed before it answers
            args = {"server": "echo", "tool": "add_tool", "args": {"name": "fresh"}}
            added.append(await client.call_tool("execute_tool", args))

        replies = await two_waits(client, add_tool)
        gone = [t for r in replies for t in elsewhere(r)]
        with anyio.fail_after(10):
            since = gone[0]["since_event_id"] if gone else None
            again = payload(
                await client.call_tool("await_activity", {"timeout_ms": 0, "since_event_id": since})
            )

    def changed(events: list[dict[str, Any]]) -> list[str]:
        return [
            e["event_id"]
            for e in events
            if e["type"] == "notification" and e["data"]["method"] == "notifications/tools/list_changed"
        ]

    carried = [*changed(replies[0]["events"]), *changed(replies[1]["events"])]
    carried += changed(envelope(added[0]).get("events_since_last_response", []))
    assert len(carried) == 1  # delivered once, with whichever reply took it first
    for reply in replies:
        assert changed(reply["events"]) or elsewhere(reply), replies
    assert gone and changed(again["events"]) == carried  # since_event_id reads it again


async def test_sixty_parked_questions_ride_on_a_reply_as_a_count_and_the_newest_five(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("elicit", "elicit.py", elicitation="park"))
    async with serving(config) as client:
        with anyio.fail_after(120):
            await until_ready(client, "elicit")
            asked = [await ask(client, f"Question {n}?") for n in range(PARKED)]
            reply = await client.call_tool("list_servers", {})
            activity = payload(await client.call_tool("await_activity", {"timeout_ms": 0}))
            listed = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            task = payload(await client.call_tool("get_task", {"task_id": asked[0]["proxy_task"]["task_id"]}))
            cli = await anyio.to_thread.run_sync(lambda: run_cli("pending", "--json"))
    pending = envelope(reply)["pending_client_action"]
    assert size(reply) < 6_000, size(reply)  # sixty reminders would be about 20 kB
    assert [q["message"] for q in pending["elicitations"]] == [f"Question {n}?" for n in range(55, 60)]
    assert pending["total"] == {"elicitations": PARKED}
    assert pending["more"] == {"elicitations": {"count": PARKED - 5, "list_with": "get_elicitations()"}}
    assert [q["message"] for q in listed] == [f"Question {n}?" for n in range(PARKED)]  # all of them
    assert cli.returncode == 0, cli.stderr
    assert len(json.loads(cli.stdout)["pending"]) == PARKED

    last = asked[-1]["pending_on_server"]  # the promotion of the sixtieth call: bounded the same way
    assert len(last["tasks"]) == 5 and len(last["elicitations_for_server"]) == 5
    assert last["total"] == {"tasks": PARKED, "elicitations_for_server": PARKED}
    assert last["more"]["tasks"] == {"count": PARKED - 5, "list_with": "list_tasks(server='elicit')"}
    [working] = activity["pending_server"]
    assert len(working["working_tasks"]) == 5 and working["total"] == {"working_tasks": PARKED}
    assert activity["pending_client"]["total"] == {"elicitations": PARKED}
    assert len(task["pending_elicitations_for_server"]) == 5
    assert task["total"] == {"pending_elicitations_for_server": PARKED}


async def ask(client: Client, question: str) -> dict[str, Any]:
    """A call to elicit's `ask`, promoted as soon as its question is parked."""
    args = {"server": "elicit", "tool": "ask", "args": {"question": question}, "timeout_ms": 30_000}
    return payload(await client.call_tool("execute_tool", args))
