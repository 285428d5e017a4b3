"""A call to a backend that is still starting waits for it as part of the call, through the real
`serve`: within timeout_ms the result comes back directly, past it the call is a task that runs
once the backend is up (or fails with why it did not start), and a host that gives up meanwhile
leaves a trace. list_tools of that one backend answers with its status instead of waiting long. A
host that calls a direct name or completes a prompt at once after connecting finds it too."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from tests.support import (
    EXAMPLES,
    HOSTILE,
    hostile_table,
    payload,
    serving,
    still_answering,
    texts,
    until_event,
    write_config,
)

pytestmark = pytest.mark.anyio


def gated(tmp_path: Path, *flags: str) -> tuple[Path, Path]:
    """A config whose backend 'late' starts only once the returned file exists."""
    gate = tmp_path / "gate"
    config = write_config(tmp_path / "config.toml", hostile_table("late", "--start-when", str(gate), *flags))
    return config, gate


async def echo(client: Client, timeout_ms: int, **kwargs: Any) -> Any:
    args = {"server": "late", "tool": "echo", "args": {"text": "hi"}, "timeout_ms": timeout_ms}
    return await client.call_tool("execute_tool", args, **kwargs)


async def test_a_call_past_timeout_ms_becomes_a_task_that_runs_once_the_backend_is_up(tmp_path: Path) -> None:
    config, gate = gated(tmp_path)
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            started = time.monotonic()
            listed = payload(await client.call_tool("list_tools", {"server": "late"}))
            listed_s = time.monotonic() - started
            promoted = payload(await echo(client, timeout_ms=200))
            task_id = promoted["proxy_task"]["task_id"]
            tasks = payload(await client.call_tool("list_tasks", {}))["tasks"]
            gate.touch()
            await until_event(client, "completed", task_id)
            result = await client.call_tool("get_task_result", {"task_id": task_id})
            await still_answering(client)
    [group] = listed["servers"]
    assert group["status"] == "starting" and "execute_tool waits for it" in group["hint"]
    assert listed_s < 8  # a short wait, not the 10 s a call used to wait before it gave up
    assert promoted["proxy_task"]["status_message"] == "waiting for backend 'late' to start"
    [task] = [t for t in tasks if t["task_id"] == task_id]
    assert task["status"] == "working" and task["status_message"] == "waiting for backend 'late' to start"
    assert not result.is_error and texts(result) == ["hi"]


async def test_a_call_within_timeout_ms_waits_for_a_slow_start_and_answers_directly(tmp_path: Path) -> None:
    # The backend sleeps longer than the 10 s a call once waited before answering "try again".
    command = f"sleep 11; exec {json.dumps(sys.executable)} {json.dumps(str(HOSTILE))}"
    table = f'[servers.late]\ncommand = "sh"\nargs = ["-c", {json.dumps(command)}]\n'
    async with serving(write_config(tmp_path / "config.toml", table)) as client:
        with anyio.fail_after(45):
            await client.call_tool("list_servers", {})
            result = await echo(client, timeout_ms=40_000)
            await still_answering(client)
    assert not result.is_error and texts(result) == ["hi"]


async def test_a_backend_that_fails_to_start_fails_the_task_with_its_exit_and_stderr(tmp_path: Path) -> None:
    config, gate = gated(tmp_path, "--exit-at-start", "3")
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            promoted = payload(await echo(client, timeout_ms=0))
            task_id = promoted["proxy_task"]["task_id"]
            gate.touch()
            await until_event(client, "failed", task_id)
            result = await client.call_tool("get_task_result", {"task_id": task_id})
            await still_answering(client)
    message = result.structured_content["error"]["message"]
    assert result.is_error and f"Task {task_id} (late.echo) failed" in message
    assert "exit code 3" in message and "exiting at start with code 3" in message


async def test_a_host_that_gives_up_while_the_backend_starts_leaves_a_trace(tmp_path: Path) -> None:
    config, gate = gated(tmp_path)
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            with pytest.raises(MCPError):  # the host's own limit, well below timeout_ms
                await echo(client, timeout_ms=30_000, read_timeout_seconds=1)
            while True:
                activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
                gave_up = [e for e in activity["events"] if e["type"] == "call_cancelled_by_host"]
                if gave_up:
                    break
            gate.touch()  # the backend starts after all; the cancelled call is not made
            tasks = payload(await client.call_tool("list_tasks", {"include_completed": True}))["tasks"]
            await still_answering(client)
    assert gave_up[0]["server"] == "late" and gave_up[0]["data"]["tool"] == "echo"
    assert gave_up[0]["data"]["waiting_for"] == "backend 'late' to start"
    assert tasks == []


async def test_a_direct_name_and_a_prompt_used_at_once_after_connecting_wait_for_their_backends(
    tmp_path: Path,
) -> None:
    # A host that knows the names already (from an earlier session; the MCP conformance suite)
    # calls them before the backends are up: they are waited for, not "no tool" / "no prompt".
    gate = tmp_path / "gate"
    surface = f"until [ -e {gate} ]; do sleep 0.05; done; exec {sys.executable} {EXAMPLES / 'surface.py'}"
    config = write_config(
        tmp_path / "config.toml",
        '[defaults]\nexpose = "direct"\n',
        hostile_table("late", "--start-when", str(gate)),
        f'[servers.notes]\ncommand = "sh"\nargs = ["-c", {json.dumps(surface)}]\n',
    )
    review = types.PromptReference(name="notes__review")
    answers: dict[str, Any] = {}

    async def early_call() -> None:
        answers["echo"] = await client.call_tool("late__echo", {"text": "early"})

    async def early_completion() -> None:
        answers["completion"] = await client.complete(review, {"name": "language", "value": "py"})

    async with serving(config) as client:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(early_call)
                tg.start_soon(early_completion)
                await client.send_ping()  # answered after both were read, while the backends wait
                gate.touch()
            servers = payload(await client.call_tool("list_servers", {}))["servers"]
            listed = {tool.name for tool in (await client.list_tools()).tools}
            again = await client.call_tool("late__echo", {"text": "again"})
            meta = await client.call_tool(
                "execute_tool", {"server": "late", "tool": "echo", "args": {"text": "m"}}
            )
            started = time.monotonic()
            unknown = await client.call_tool("late__nothing", {})
            unknown_s = time.monotonic() - started
            prompt = await client.get_prompt("notes__review", {"language": "python"})
            await still_answering(client)
    assert {s["name"]: s["status"] for s in servers} == {"late": "ready", "notes": "ready"}
    assert not answers["echo"].is_error and texts(answers["echo"]) == ["early"]
    assert answers["completion"].completion.values[:1] == ["python"]
    assert {"late__echo", "execute_tool"} <= listed
    assert texts(again) == ["again"] and texts(meta) == ["m"]
    assert unknown.is_error and "has no tool 'late__nothing'" in texts(unknown)[0]
    assert unknown_s < 5  # every backend is up: an unknown name is refused at once
    assert isinstance(prompt.messages[0].content, types.TextContent)
