"""What a user trial of emceepee with real backends found, pinned through the real `serve` process:
how a promotion for a question is worded, how a call cut by emceepee's own stop reads, a question
outliving the task TTL, a host that gives up on a call, and what a pending question costs a reply."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from emceepee_cli.store.journal import Journal
from tests.support import envelope, example_table, payload, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio


def elicit_config(tmp_path: Path, defaults: str = "") -> Path:
    return write_config(tmp_path / "config.toml", defaults, example_table("elicit", "elicit.py"))


async def ask(client: Client, question: str, timeout_ms: int = 30_000) -> Any:
    args = {"server": "elicit", "tool": "ask", "args": {"question": question}, "timeout_ms": timeout_ms}
    return await client.call_tool("execute_tool", args)


async def test_a_call_promoted_beside_a_question_on_its_server_says_so(tmp_path: Path) -> None:
    replies: list[Any] = []
    async with serving(elicit_config(tmp_path)) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            await client.call_tool("list_tools", {})  # the backend is up: its calls run at once

            async def one(question: str) -> None:
                replies.append(await ask(client, question))

            async with anyio.create_task_group() as tg:  # two calls in flight: a question is the server's
                tg.start_soon(one, "First?")
                tg.start_soon(one, "Second?")
            await still_answering(client)
    for reply in replies:  # a question that came while this call ran alone is its own: a saga
        summary = texts(reply)[0]
        assert "is still running" not in summary
        assert "for an answer to a question" in summary and "respond_to_elicitation" in summary


async def test_a_task_cut_by_a_normal_stop_says_emceepee_stopped_and_why_not_the_backend(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            slow = {"server": "echo", "tool": "slow", "args": {"seconds": 60, "steps": 1}, "timeout_ms": 10}
            task = payload(await client.call_tool("execute_tool", slow))["proxy_task"]
    # The host closed stdin: serve stopped the backend, then itself.
    row = Journal().tasks.row(task["task_id"])
    assert row is not None and row["status"] == "interrupted"
    assert row["error"] == (
        "emceepee serve stopped (the host closed its connection) while the call to echo.slow was running;"
        " the backend was stopped with it."
    )


async def test_a_parked_question_outlives_the_task_ttl_until_its_own_timeout(tmp_path: Path) -> None:
    config = elicit_config(tmp_path, "[defaults]\ntask_ttl_ms = 1500\npending_timeout_ms = 60000\n")
    async with serving(config) as client:
        with anyio.fail_after(40):
            await client.call_tool("list_tools", {})  # the TTL also bounds a wait for the backend's start
            promoted = payload(await ask(client, "Name?", timeout_ms=0))
            task_id = promoted["proxy_task"]["task_id"]
            past_ttl = time.monotonic() + 3.0
            while time.monotonic() < past_ttl:  # the TTL passes while the question waits
                await client.call_tool("await_activity", {"timeout_ms": 500})
            task = payload(await client.call_tool("get_task", {"task_id": task_id}))["task"]
            [question] = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            await client.call_tool(
                "respond_to_elicitation",
                {"request_id": question["request_id"], "action": "accept", "content": {"name": "Ada"}},
            )
            result = await client.call_tool("get_task_result", {"task_id": task_id})
    assert task["status"] == "working" and task["expires_at"] >= question["expires_at"]
    assert texts(result) == ["hello Ada"]


async def test_a_call_the_host_gives_up_on_leaves_an_event_and_a_log_line(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})  # waits (bounded) until echo is ready
            slow = {
                "server": "echo",
                "tool": "slow",
                "args": {"seconds": 20, "steps": 1},
                "timeout_ms": 30_000,
            }
            with pytest.raises(MCPError):  # the host's own limit, well below timeout_ms
                await client.call_tool("execute_tool", slow, read_timeout_seconds=1)
            while True:
                activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
                gave_up = [e for e in activity["events"] if e["type"] == "call_cancelled_by_host"]
                if gave_up:
                    break
            await still_answering(client)
    assert gave_up[0]["server"] == "echo" and gave_up[0]["data"]["tool"] == "slow"
    assert "Keep timeout_ms below the host's limit" in gave_up[0]["data"]["hint"]


async def test_a_pending_question_is_shown_whole_once_then_as_a_short_reminder(tmp_path: Path) -> None:
    async with serving(elicit_config(tmp_path)) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            promoted = await ask(client, "Name?")  # promoted once the question comes
            later = await client.call_tool("list_servers", {})
            again = await client.call_tool("list_servers", {})
            listed = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
    whole = json.dumps(listed[0]["requested_schema"], separators=(",", ":"))
    promotion = "".join(texts(promoted, with_envelope=True))
    assert promotion.count(whole) == 1  # in the saga's step, not again beside it
    for reply in (later, again):
        [reminder] = envelope(reply)["pending_client_action"]["elicitations"]
        assert reminder == {
            "request_id": listed[0]["request_id"],
            "server": "elicit",
            "kind": "elicitation",
            "message": "Name?",
            "task_id": listed[0]["task_id"],
            "expires_at": listed[0]["expires_at"],
            "details": "get_elicitations(server='elicit')",
        }
    assert len(json.dumps(envelope(again))) < 400
