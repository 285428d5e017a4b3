"""What a hostile backend says, through a real `emceepee serve`: clear errors at once, bounded costs.

Two serve processes share the checks: one for backends that cannot start, one for backends that
flood serve (stderr without newlines, list_changed storms, an answer over the line limit, a log
file that cannot be written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from emceepee_cli import processes
from tests.support import (
    envelope,
    hostile_table,
    payload,
    serving,
    still_answering,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

CUT = "[cut: line longer than 4096 bytes]"


async def call(client: Client, server: str, tool: str, **args: Any) -> Any:
    return await client.call_tool("execute_tool", {"server": server, "tool": tool, "args": args})


async def own_processes(client: Client, server: str) -> set[processes.Proc]:
    """Everything the serve process behind `client` has started (found through a ready backend)."""
    pid = int(texts(await call(client, server, "pid"))[0])
    found = processes.stat(pid)
    assert found is not None
    return processes.tree(found.ppid)


@pytest.mark.skipif(not processes.HAVE_PROC, reason="needs /proc to find serve's processes")
async def test_a_backend_that_cannot_start_is_reported_at_once_with_its_reason(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("dead", "--exit-at-start", "3"),
        hostile_table("garbage", "--handshake", "garbage"),
        hostile_table("ok"),
    )
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
        # Not the 10 s a call used to wait for a backend still "starting", nor the 60 s handshake timeout.
        with anyio.fail_after(8):
            dead = await call(client, "dead", "echo", text="x")
            garbage = await call(client, "garbage", "echo", text="x")
        with anyio.fail_after(30):
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
            started = await own_processes(client, "ok")
        await still_answering(client)
    assert dead.is_error and "exit code 3" in texts(dead)[0]
    assert "hostile: exiting at start with code 3" in texts(dead)[0]
    assert garbage.is_error and "not JSON-RPC" in texts(garbage)[0]
    assert "garbage instead of an initialize result" in texts(garbage)[0]
    assert servers["garbage"]["status"] == "failed"
    assert "exit code 3" in servers["dead"]["last_error"]
    assert not any(proc.running() for proc in started)


@pytest.mark.skipif(not processes.HAVE_PROC, reason="needs /proc to find serve's processes")
async def test_what_a_backend_floods_serve_with_is_bounded_and_its_connection_survives(
    tmp_path: Path, emceepee_home: Path
) -> None:
    logs = emceepee_home / "data" / "logs"
    logs.mkdir(parents=True)
    (logs / "full.log").symlink_to("/dev/full")  # every write fails with ENOSPC
    config = write_config(
        tmp_path / "config.toml", hostile_table("h"), hostile_table("blob"), hostile_table("full")
    )
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            pid = texts(await call(client, "h", "pid"))[0]
            await until_ready(client, "full")  # its log file failed at its start: before the floods
        with anyio.fail_after(30):  # 20 MiB of stderr without a newline, then the backend dies
            await call(client, "blob", "stderr_blob", mb=20)
            blob_logs = await client.call_tool("get_logs", {"server": "blob", "limit": 1000})
            died = await call(client, "blob", "die", code=4)
            await call(client, "h", "stderr_lines", mb=3)  # three times the size a log file rotates at
        with anyio.fail_after(60):
            flooded = await call(client, "h", "flood", n=10000)
            after = await client.call_tool("list_servers", {})
            notes = payload(await client.call_tool("get_notifications", {"server": "h"}))["notifications"]
            listings = int(texts(await call(client, "h", "listings"))[0])
        with anyio.fail_after(60):
            oversize = await call(client, "h", "oversize", mb=65)
            pid_after = texts(await call(client, "h", "pid"))[0]
        with anyio.fail_after(30):
            await call(client, "full", "stderr_lines", mb=0.01)
            full_echo = await call(client, "full", "echo", text="still here")
            full_logs = payload(await client.call_tool("get_logs", {"server": "full", "limit": 1000}))["logs"]
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
            started = await own_processes(client, "h")
        await still_answering(client)

    # stderr: every line kept is cut, in memory, in errors and on disk; the log rotates as it grows
    assert len(json.dumps(blob_logs.structured_content)) < 100_000
    assert CUT in texts(died)[0] and "exit code 4" in texts(died)[0] and len(texts(died)[0]) < 16_000
    assert len(servers["blob"].get("last_error", "")) < 16_000
    assert (logs / "h.log.1").exists() and (logs / "h.log").stat().st_size <= 1024 * 1024 + 8192
    for name in ("h.log", "h.log.1", "blob.log"):
        longest = max(len(line) for line in (logs / name).read_bytes().splitlines())
        assert longest <= len("2026-01-31T12:00:00.000Z ") + 4096 + len(CUT) + 8  # a stamp, the line, the cut

    # the flood: one refresh running and one queued at most; events and notifications counted, not kept
    replies = [
        envelope(flooded).get("events_since_last_response", []),
        envelope(after).get("events_since_last_response", []),
    ]
    assert all(len(events) <= 100 and len(json.dumps(events)) < 50_000 for events in replies)
    changed = [e for events in replies for e in events if e["type"] == "notification" and e["server"] == "h"]
    assert sum(e["data"].get("count", 1) for e in changed) == 10000
    assert [n.get("count") for n in notes if n["method"] == "notifications/tools/list_changed"] == [10000]
    assert listings < 1000, listings  # about 6 here; each list_changed used to cost one (10001)

    # an answer over 64 MiB fails its own call; the connection (and the process) lives on
    assert oversize.is_error and "over 64 MiB" in texts(oversize)[0]
    assert pid_after == pid and servers["h"]["restarts"] == 0

    # a log file that cannot be written costs only the file
    assert texts(full_echo) == ["still here"] and servers["full"]["restarts"] == 0
    # ... reported at its start, and not pushed out of get_logs by the others' floods since
    assert any("cannot write the stderr log" in entry["message"] for entry in full_logs)
    assert any(entry["source"] == "stderr" for entry in full_logs)

    assert not any(proc.running() for proc in started)
