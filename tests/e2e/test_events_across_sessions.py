"""Events are not lost with a reply or a session: a host that lost a reply asks again with the last
event id it saw, and what a stopped `serve` never delivered reaches the next session once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from emceepee_cli.store.journal import Journal
from tests.support import (
    Gate,
    RawHost,
    envelope,
    hostile_table,
    payload,
    serve_command,
    serving,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", hostile_table("h"))


async def gated_task(client: Client, gate: Gate) -> tuple[str, list[dict[str, Any]]]:
    """Start h.gated as a task at once (it ends when the test opens `gate`, so never before its
    reply); its id and the events its reply carried."""
    result = await client.call_tool(
        "execute_tool", {"server": "h", "tool": "gated", "args": gate.args(), "timeout_ms": 0}
    )
    return payload(result)["proxy_task"]["task_id"], envelope(result).get("events_since_last_response", [])


async def test_a_host_that_lost_a_reply_gets_its_events_again_with_since_event_id(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            before = payload(await client.call_tool("await_activity", {"timeout_ms": 0}))["last_event_id"]
            task_id, seen = await gated_task(client, gate)
            gate.open()
            while not any(e["type"] == "task_status" and e["data"]["task_id"] == task_id for e in seen):
                activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
                seen += activity["events"]
                last = activity["last_event_id"]
            again = payload(
                await client.call_tool("await_activity", {"timeout_ms": 0, "since_event_id": before})
            )
            after = payload(
                await client.call_tool("await_activity", {"timeout_ms": 0, "since_event_id": last})
            )
    assert before is not None and [e["type"] for e in seen][-1] == "task_status"
    assert [e["event_id"] for e in again["events"]] == [e["event_id"] for e in seen]
    assert again["events"][-1]["data"]["status"] == "completed"
    assert again["triggers"] == [{"type": "immediate"}] and again["last_event_id"] == last
    assert after["events"] == [] and after["triggers"] == [{"type": "timeout"}]


async def undelivered(event_type: str) -> dict[str, Any]:
    """The first journaled event of this type (the caller bounds the wait)."""
    journal = Journal()
    try:
        while True:
            rows = list(journal.db.query("SELECT * FROM events WHERE type = ?", [event_type]))
            if rows:
                return rows[0]
            await anyio.sleep(0.05)  # the journal is another process's: it cannot wake us
    finally:
        journal.close()


@pytest.mark.parametrize("ending", ["stdin closed", "kill -9"])
async def test_events_a_serve_never_delivered_reach_the_next_session_once(
    config: Path, tmp_path: Path, ending: str
) -> None:
    gate = Gate(tmp_path / "gate")
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(30):
            await host.initialize()
            await host.tool("list_servers", {})
            await host.tool("list_tools", {})  # the backend is up, so the call itself is what is promoted
            promoted = await host.tool(
                "execute_tool", {"server": "h", "tool": "gated", "args": gate.args(), "timeout_ms": 0}
            )
            gate.open()  # the call ends only after its reply: its end is the host's to hear later
            ended = await undelivered("task_status")  # journaled, and the host never asked again
        if ending == "kill -9":
            process.kill()
        else:
            assert process.stdin is not None
            await process.stdin.aclose()
        with anyio.fail_after(20):
            await process.wait()
    finally:
        await process.aclose()
    async with serving(config) as second:
        with anyio.fail_after(30):
            listing = await second.call_tool("list_tools", {})
            later = await second.call_tool("list_servers", {})
    replayed = [e for e in envelope(listing)["events_since_last_response"] if e.get("replayed")]
    assert [e["event_id"] for e in replayed] == [ended["event_id"]]
    task_id = promoted["proxy_task"]["task_id"]
    assert replayed[0]["data"] == {"task_id": task_id, "tool": "gated", "status": "completed"}
    assert not any(e.get("replayed") for e in envelope(later).get("events_since_last_response", []))
