"""`emceepee serve` as a real process, driven over stdio the way a host drives it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters

from tests.support import (
    RawHost,
    alive,
    example_table,
    home_env,
    payload,
    serve_command,
    text_of,
    texts,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("echo", "echo.py"),
        example_table("many", "many_tools.py"),
    )


def serve_params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "emceepee_cli", "serve", "--config", str(config)],
        env={**home_env()},
    )


async def test_a_host_reaches_every_backend_through_serve(config: Path) -> None:
    async with Client(serve_params(config), mode="legacy") as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
            echo = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "over stdio"}}
            )
            structured = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "structured", "args": {}}
            )
            failed = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "fail", "args": {"message": "m"}}
            )
            thirtieth = await client.call_tool(
                "execute_tool", {"server": "many", "tool": "tool_30", "args": {"n": 1}}
            )
            readme = await client.call_tool("read_resource", {"server": "echo", "uri": "echo://readme"})
            prompt = payload(
                await client.call_tool(
                    "get_prompt", {"server": "echo", "name": "greet", "arguments": {"name": "Bo"}}
                )
            )
    assert servers["echo"]["status"] == "ready" and servers["many"]["status"] == "ready"
    assert servers["many"]["tools"] == 40
    assert texts(echo) == ["over stdio"]
    assert structured.structured_content == {"items": [1, 2, 3], "ok": True}
    assert failed.is_error and texts(failed) == ["m"]
    assert texts(thirtieth) == ["tool_30 got 1"]
    assert "echo example backend" in text_of(readme.content[0])
    assert prompt["messages"][0]["content"]["text"] == "Say hello to Bo."
    assert not any(alive(row["pid"]) for row in servers.values()), "a backend outlived serve (stdin closed)"


async def test_sigterm_stops_serve_and_every_backend(config: Path) -> None:
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(30):
            await host.initialize()
            await host.send("tools/call", {"name": "list_tools", "arguments": {}})
            listing = await host.send("tools/call", {"name": "list_servers", "arguments": {}})
        pids = [row["pid"] for row in listing["structuredContent"]["servers"]]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(15):
            code = await process.wait()
        assert code == 0
        assert not any(alive(pid) for pid in pids), "a backend outlived serve (SIGTERM)"
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
