"""A backend's "URL elicitation required" (-32042) over the real `serve`: the URLs reach the model
with their ids, each is parked once as a URL question, and the backend's completion settles it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support import envelope, example_table, payload, serving, texts, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", example_table("urlauth", "urlauth.py"))


async def run(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool("execute_tool", {"server": "urlauth", "tool": tool, "args": args})


async def test_the_urls_are_kept_parked_once_and_settled_by_the_backend(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_servers", {})
            await client.call_tool("list_tools", {})
            first = await run(client, "sync_all")
            again = await run(client, "sync_all")
            parked = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            ids = re.findall(r"elicitation ([0-9a-f]+)\)", texts(first)[0])
            replies = [await run(client, "complete_auth", elicitation_id=i) for i in ids]
            done = [texts(r) for r in replies]
            events = [e for r in replies for e in envelope(r).get("events_since_last_response", [])]
            while len([e for e in events if e["type"] == "elicitation_complete"]) < 2:
                activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
                events += activity["events"]
            left = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            synced = await run(client, "sync_all")
    message = texts(first)[0]
    assert first.is_error and "needs the user to open a URL" in message
    assert len(ids) == 2 and all(f"elicitation {i}" in texts(again)[0] for i in ids)
    assert sorted(q["url"].rsplit("=", 1)[1] for q in parked) == sorted(ids)  # two questions, not four
    assert all(q["url"] in message and q["request_id"] in message for q in parked)
    assert all(d[0].startswith("authorized") for d in done)
    assert left == [] and texts(synced) == ["synced files and calendar"]
    assert envelope(first) != {}  # the questions are announced with the failure


async def test_the_model_can_record_consent_for_a_url_question(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            await run(client, "list_files")
            [question] = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            answered = payload(
                await client.call_tool(
                    "respond_to_elicitation", {"request_id": question["request_id"], "action": "accept"}
                )
            )
    assert question["url"].startswith("http") and answered["answered"]["status"] == "accepted"
