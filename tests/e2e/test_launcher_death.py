"""A backend started through a launcher (as npx and uvx start theirs): when the launcher dies and
the server it started keeps the pipes, serve notices, stops that server and restarts the backend,
so the pid list_servers shows is never stale."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from emceepee_cli import processes
from tests.support import EXAMPLES, alive, payload, serving, write_config

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not processes.HAVE_PROC, reason="needs /proc to find the launched server"),
]


def launcher_table(name: str) -> str:
    # `; true` keeps the shell alive as the server's parent (a lone command would be exec'd).
    script = f"{sys.executable} {EXAMPLES / 'echo.py'}; true"
    return f'[servers.{name}]\ncommand = "sh"\nargs = {json.dumps(["-c", script])}\n'


async def ready_row(client: Client, *, not_pid: int | None = None) -> dict[str, object]:
    """The backend's list_servers row once it is ready (with another pid than `not_pid`)."""
    while True:
        row: dict[str, object]
        [row] = payload(await client.call_tool("list_servers", {}))["servers"]
        if row["status"] == "ready" and row.get("pid") not in (None, not_pid):
            return row
        await client.call_tool("await_activity", {"timeout_ms": 1000})


async def test_a_dead_launcher_restarts_the_backend_and_stops_its_server(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", launcher_table("wrapped"))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            first = await ready_row(client)
            launcher = int(str(first["pid"]))
            [server] = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
            os.kill(launcher, signal.SIGKILL)
            second = await ready_row(client, not_pid=launcher)
            echoed = await client.call_tool(
                "execute_tool", {"server": "wrapped", "tool": "echo", "args": {"text": "hi"}}
            )
            while alive(int(server)):
                await client.call_tool("await_activity", {"timeout_ms": 200})
    assert second["restarts"] == 1 and second["pid"] != launcher
    assert not echoed.is_error
