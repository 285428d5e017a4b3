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
from emceepee_cli.server.reload import EMPTYING_S
from emceepee_cli.store import inspect
from tests.e2e.test_reload import servers
from tests.support import (
    alive,
    example_table,
    hostile_table,
    payload,
    serving,
    still_answering,
    texts,
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


def tables(tmp_path: Path, greeting: str = "hello") -> tuple[str, str]:
    """Server `a` (a hostile backend, whose `hold` keeps a call in flight) and server `b` (echo)."""
    return hostile_table("a"), example_table("b", "echo.py", env={"GREETING": greeting})


async def held_call(client: Client, gate: Path) -> str:
    """A call on `a` that stays in flight (a task) until `gate` exists; its task id."""
    args = {"server": "a", "tool": "hold", "args": {"gate": str(gate)}, "timeout_ms": 10}
    started = payload(await client.call_tool("execute_tool", args))
    assert started["proxy_task"]["status"] == "working", started
    return str(started["proxy_task"]["task_id"])


async def test_a_file_truncated_then_written_back_touches_only_the_server_that_changed(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    gate = tmp_path / "gate"
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            task_id = await held_call(client, gate)
            config.write_text("")  # the editor truncates the file...
            held = await next_config_event(client)
            write_config(config, *tables(tmp_path, greeting="changed"))  # ...and writes it back
            reloaded = await next_config_event(client)
            gate.touch()
            finished = await client.call_tool("get_task_result", {"task_id": task_id})
            await until_ready(client, "b")
            after = await servers(client)
            await still_answering(client)
    assert held["type"] == "config_reload_held", held
    assert held["reason"] == "the file names no server"
    assert held["would_stop"] == ["a", "b"] and held["applies_after_s"] == EMPTYING_S
    assert reloaded == {
        "type": "config_reloaded",
        "reason": "the file changed",
        "started": [],
        "stopped": [],
        "restarted": ["b"],
    }
    assert texts(finished) == ["released"], "the call in flight on the unchanged server was lost"
    assert after["a"]["pid"] == before["a"]["pid"]  # untouched
    assert after["b"]["pid"] != before["b"]["pid"] and not alive(before["b"]["pid"])


async def test_a_half_written_file_between_truncation_and_the_full_file_changes_nothing(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    full = "\n".join(tables(tmp_path, greeting="changed"))
    gate = tmp_path / "gate"
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            task_id = await held_call(client, gate)
            config.write_text("")
            held = await next_config_event(client)
            config.write_text(full[: full.index("[servers.b]") + len("[servers.b")])  # cut mid-header
            half = await next_config_event(client)
            config.write_text(full)
            reloaded = await next_config_event(client)
            gate.touch()
            finished = await client.call_tool("get_task_result", {"task_id": task_id})
            await until_ready(client, "b")
            after = await servers(client)
    assert held["type"] == "config_reload_held", held
    assert half["type"] == "config_reload_failed" and half["kept"] == "the running config"
    assert reloaded["type"] == "config_reloaded", reloaded
    assert (reloaded["started"], reloaded["stopped"], reloaded["restarted"]) == ([], [], ["b"])
    assert texts(finished) == ["released"]
    assert after["a"]["pid"] == before["a"]["pid"]
    assert after["b"]["pid"] != before["b"]["pid"]


async def test_a_file_that_names_no_server_is_applied_once_it_stayed_so(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            config.write_text("# every server removed, on purpose\n")
            held = await next_config_event(client)
            applied = await next_config_event(client)
            after = await servers(client)
            await still_answering(client)
    assert held["type"] == "config_reload_held", held
    assert "SIGHUP" in held["hint"]
    assert applied == {
        "type": "config_reloaded",
        "reason": f"the file names no server, and stayed so for {EMPTYING_S:g} s",
        "started": [],
        "stopped": ["a", "b"],
        "restarted": [],
    }
    assert after == {}
    assert not alive(before["a"]["pid"]) and not alive(before["b"]["pid"])


async def test_a_deleted_file_stops_its_servers_only_once_it_stayed_gone(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            config.unlink()
            held = await next_config_event(client)
            applied = await next_config_event(client)
            after = await servers(client)
    assert held["type"] == "config_reload_held", held
    assert held["reason"] == "the file is gone" and held["would_stop"] == ["a", "b"]
    assert applied["type"] == "config_reloaded", applied
    assert applied["reason"] == f"the file is gone, and stayed so for {EMPTYING_S:g} s"
    assert applied["stopped"] == ["a", "b"]
    assert after == {} and not alive(before["a"]["pid"])


async def test_a_file_deleted_and_written_anew_as_some_editors_save_touches_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            before = await servers(client)
            config.unlink()
            held = await next_config_event(client)
            write_config(config, *tables(tmp_path))  # the same servers, in a new file
            reloaded = await next_config_event(client)
            after = await servers(client)
    assert held["type"] == "config_reload_held", held
    assert reloaded == {
        "type": "config_reloaded",
        "reason": "the file changed",
        "started": [],
        "stopped": [],
        "restarted": [],
    }
    assert {name: row["pid"] for name, row in after.items()} == {
        name: row["pid"] for name, row in before.items()
    }


async def test_sighup_applies_a_file_that_names_no_server_at_once(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", *tables(tmp_path))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client)
            config.write_text("")
            held = await next_config_event(client)
            (serve,) = inspect.instances(paths.db_path())
            os.kill(serve["pid"], signal.SIGHUP)  # the person asks for it now
            applied = await next_config_event(client)
            after = await servers(client)
    assert held["type"] == "config_reload_held", held
    assert applied == {
        "type": "config_reloaded",
        "reason": "SIGHUP",
        "started": [],
        "stopped": ["a", "b"],
        "restarted": [],
    }
    assert after == {}


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
