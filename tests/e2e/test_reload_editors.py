"""A running `serve` follows its config file the way editors actually save it: truncated, then written
back a moment later; half written; replaced by rename; deleted. Only a file that has stopped changing
and parses is applied; one that would stop every server (or is gone) only once it stayed so for a
while; and a server whose table did not change is never touched, whatever the file went through."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from emceepee_cli import paths
from emceepee_cli.store import inspect
from tests.e2e.test_reload import servers
from tests.support import (
    example_table,
    payload,
    serving,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

CONFIG_EVENTS = ("config_reloaded", "config_reload_failed", "config_reload_held")


async def next_config_event(client: Client) -> dict[str, Any]:
    """The next config event, whichever it is, as `{"type": …, **data}` (the caller bounds the wait)."""
    while True:
        activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
        for event in activity["events"]:
            if event["type"] in CONFIG_EVENTS:
                return {"type": event["type"], **event["data"]}


async def test_a_reload_keeps_a_server_running_when_defaults_add_to_its_environment(tmp_path: Path) -> None:
    defaults = '[defaults]\npass_env = ["LC_*"]\n'
    config = write_config(tmp_path / "config.toml", defaults, example_table("b", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            (serve,) = inspect.instances(paths.db_path())
            os.kill(serve["pid"], signal.SIGHUP)
            reloaded = await next_config_event(client)
            after = await servers(client)
    assert reloaded == {
        "type": "config_reloaded",
        "reason": "SIGHUP",
        "started": [],
        "stopped": [],
        "restarted": [],
    }
    assert after["b"]["pid"] == before["b"]["pid"]
