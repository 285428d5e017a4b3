"""A running `serve` follows its config file (and SIGHUP) without a restart, and without the host noticing
more than an event: only the servers that changed start, stop or restart."""

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
from tests.support import (
    alive,
    example_table,
    next_event,
    payload,
    run_cli,
    serving,
    still_answering,
    texts,
    write_config,
)

pytestmark = pytest.mark.anyio


async def servers(client: Client) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in payload(await client.call_tool("list_servers", {}))["servers"]}


async def test_serve_starts_an_added_server_and_stops_a_removed_one_without_restarting(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "config.toml", example_table("echo", "echo.py"), example_table("many", "many_tools.py")
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            before = await servers(client)
            assert before["echo"]["status"] == before["many"]["status"] == "ready"
            write_config(config, example_table("echo", "echo.py"), example_table("alpha", "echo.py"))
            reloaded = await next_event(client, "config_reloaded")
            after = await servers(client)
            called = await client.call_tool(
                "execute_tool", {"server": "alpha", "tool": "echo", "args": {"text": "hi"}}
            )
            await still_answering(client)
    assert reloaded == {
        "reason": "the file changed",
        "started": ["alpha"],
        "stopped": ["many"],
        "restarted": [],
    }
    assert set(after) == {"echo", "alpha"}
    assert after["echo"]["pid"] == before["echo"]["pid"]  # untouched: not restarted
    assert not alive(before["many"]["pid"])
    assert texts(called) == ["hi"]


async def test_a_broken_config_keeps_what_runs_and_says_why(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            pid = (await servers(client))["echo"]["pid"]
            config.write_text("[servers.echo\ncommand = ")
            not_toml = await next_event(client, "config_reload_failed")
            config.write_text('[servers.echo]\ncommand = 5\n[servers.beta]\ncommand = "x"\nbad = 1\n')
            broken = await next_event(client, "config_reloaded")
            after = await servers(client)
            called = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "still"}}
            )
    assert "config.toml is not valid TOML" in not_toml["error"]
    assert not_toml["kept"] == "the running config"
    assert broken["stopped"] == [] and broken["started"] == []
    assert (
        broken["kept_running"]["echo"]
        == "config.toml: server 'echo', field 'command': must be a string (got 5)"
    )
    assert after["echo"]["pid"] == pid and texts(called) == ["still"]


async def test_sighup_reloads_instead_of_killing_serve_and_a_changed_server_restarts(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            pid = (await servers(client))["echo"]["pid"]
            (serve,) = inspect.instances(paths.db_path())
            os.kill(serve["pid"], signal.SIGHUP)
            unchanged = await next_event(client, "config_reloaded")
            write_config(config, example_table("echo", "echo.py", env={"GREETING": "changed"}))
            changed = await next_event(client, "config_reloaded")
            await client.call_tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}})
            after = await servers(client)
            await still_answering(client)
    assert unchanged == {"reason": "SIGHUP", "started": [], "stopped": [], "restarted": []}
    assert changed["restarted"] == ["echo"]
    assert after["echo"]["pid"] != pid and not alive(pid)


async def test_a_server_switched_off_and_on_from_the_cli_is_said_disabled_and_enabled_not_restarted(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "config.toml", example_table("echo", "echo.py"), example_table("other", "echo.py")
    )
    async with serving(config) as client:
        with anyio.fail_after(90):
            await client.call_tool("list_tools", {})
            await client.call_tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}})
            other = (await servers(client))["other"]["pid"]
            assert run_cli("servers", "disable", "echo", "--config", str(config)).returncode == 0
            off = await next_event(client, "config_reloaded")
            between = await servers(client)
            assert run_cli("servers", "enable", "echo", "--config", str(config)).returncode == 0
            on = await next_event(client, "config_reloaded")
            called = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "back"}}
            )
            after = await servers(client)
            await still_answering(client)
    assert off == {
        "reason": "the file changed",
        "started": [],
        "stopped": [],
        "restarted": [],
        "disabled": ["echo"],
    }
    assert on == {
        "reason": "the file changed",
        "started": [],
        "stopped": [],
        "restarted": [],
        "enabled": ["echo"],
    }
    assert between["echo"]["status"] == "disabled" and texts(called) == ["back"]
    assert between["other"]["pid"] == after["other"]["pid"] == other  # untouched throughout
