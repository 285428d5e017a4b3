"""A backend tool that runs only as an MCP task (`taskSupport: required`) is called task-augmented
over the real `serve`: it completes (as an emceepee task when slow) and `cancel_task` cancels the
backend's task."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support import example_table, payload, serving, texts, until_ready, write_config

pytestmark = pytest.mark.anyio


def make_config(tmp_path: Path) -> Path:
    env = {"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "backend.log")}
    return write_config(tmp_path / "config.toml", example_table("tasks", "tasks.py", env=env))


def research(args: dict[str, object], timeout_ms: int) -> dict[str, object]:
    return {"server": "tasks", "tool": "research", "args": args, "timeout_ms": timeout_ms}


async def test_a_task_only_tool_completes_as_an_emceepee_task(tmp_path: Path) -> None:
    async with serving(make_config(tmp_path)) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_servers", {})
            await until_ready(client, "tasks")
            direct = await client.call_tool("execute_tool", research({"topic": "mcp", "polls": 2}, 30_000))
            promoted = payload(
                await client.call_tool("execute_tool", research({"topic": "tea", "polls": 6}, 0))
            )
            result = await client.call_tool(
                "get_task_result", {"task_id": promoted["proxy_task"]["task_id"], "timeout_ms": 30_000}
            )
    assert not direct.is_error and texts(direct)[0].startswith("report on mcp")
    assert promoted["proxy_task"]["status"] == "working"
    assert not result.is_error and texts(result)[0].startswith("report on tea")
    lines = (tmp_path / "backend.log").read_text().splitlines()
    assert [line.split()[0] for line in lines if "research" in line].count("finished") == 2


async def logged(log: Path, line: str) -> None:
    """Until the backend has logged `line` (the caller bounds the wait)."""
    while True:
        if log.exists() and line in log.read_text():
            return
        await anyio.sleep(0.05)  # the backend writes its log in another process: poll it


async def test_cancel_task_cancels_the_backend_task(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    async with serving(make_config(tmp_path)) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            promoted = payload(
                await client.call_tool("execute_tool", research({"topic": "x", "seconds": 600}, 0))
            )
            task_id = promoted["proxy_task"]["task_id"]
            await logged(log, "started research")
            cancelled = payload(await client.call_tool("cancel_task", {"task_id": task_id}))
            await logged(log, "cancelled research")
    assert cancelled["task"]["status"] == "cancelled"
