"""Direct mode over the real `serve`: backend tools on the host's tools/list as server__tool (odd,
colliding and long names made safe, each routed to its own tool), called through execute_tool's
path (schema check, promotion to a task), and tools/list_changed when backends come and go."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import HOSTILE, Gate, hostile_table, payload, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio

SAFE = re.compile(r"[A-Za-z0-9_-]{1,40}")
LONG = "synchronize-every-customer-record-across-all-regional-databases-now"
ODD = ["x.y", "x_y", "weird name/!", LONG, "a__b"]


async def host_tools(client: Client) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_backend_tools_are_listed_and_called_directly_with_safe_unique_names(tmp_path: Path) -> None:
    flags = [flag for name in ODD for flag in ("--tool", name)]
    config = write_config(
        tmp_path / "config.toml",
        '[defaults]\nexpose = "both"\ndirect_name_max = 40\n',
        hostile_table("h", *flags),
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            listed = await host_tools(client)
            mapping = payload(await client.call_tool("list_tools", {"server": "h"}))
            direct = {t["name"]: t["direct_name"] for t in mapping["servers"][0]["tools"]}
            called = {name: texts(await client.call_tool(direct[name], {})) for name in ODD}
            echoed = await client.call_tool("h__echo", {"text": "hi"})
            refused = await client.call_tool("h__echo", {"text": 5})
            await still_answering(client)
    assert "execute_tool" in listed and "h__echo" in listed and listed["h__echo"].input_schema["properties"]
    assert direct["x_y"] == "h__x_y" and direct["x.y"] != "h__x_y"  # a changed name never takes another's
    assert direct["a__b"] == "h__a__b"  # kept as it is: calls never split on `__`
    assert all(SAFE.fullmatch(name) for name in direct.values()) and len(set(direct.values())) == len(direct)
    assert set(direct.values()) <= set(listed)
    assert all(called[name][0] == f"{name} called" for name in ODD)
    assert texts(echoed)[0] == "hi"
    assert refused.is_error and "do not match its input schema" in texts(refused)[0]


async def test_a_direct_call_becomes_a_task_and_list_changes_are_announced(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        '[defaults]\nexpose = "direct"\ntimeout_ms = 300\nmodel_adds_servers = "allow"\n',
        hostile_table("h"),
    )
    gate = Gate(tmp_path / "gate")
    changed = anyio.Event()
    changes = 0

    async def on_message(message: Any) -> None:
        nonlocal changed, changes
        if isinstance(message, types.ToolListChangedNotification):
            changes += 1
            changed.set()

    async with serving(config, message_handler=on_message) as client:
        with anyio.fail_after(60):
            before = await host_tools(client)
            slow = payload(await client.call_tool("h__gated", gate.args("done")))
            task_id = slow["proxy_task"]["task_id"]
            gate.open()
            done = await client.call_tool("get_task_result", {"task_id": task_id, "timeout_ms": 20_000})
            brief = payload(await client.call_tool("list_tools", {"server": "h"}))["servers"][0]["tools"]
            changed = anyio.Event()
            added = {"name": "more", "command": sys.executable, "args": [str(HOSTILE)], "persist": False}
            await client.call_tool("add_server", added)
            await changed.wait()
            with_more = await host_tools(client)
            changed = anyio.Event()
            await client.call_tool("remove_server", {"name": "more"})
            await changed.wait()
            after = await host_tools(client)
    assert "h__gated" in before and "more__echo" not in before
    assert texts(done)[0] == "done"
    assert {
        "name": "echo",
        "description": "",
        "direct_name": "h__echo",
    } in brief  # its schema is on tools/list
    assert "more__echo" in with_more and "more__echo" not in after and "h__echo" in after
    assert changes >= 2
