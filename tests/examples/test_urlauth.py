"""The "urlauth" example backend, driven directly: -32042 URL elicitation required, then completion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError, UrlElicitationRequiredError

from tests.examples.direct import direct, events
from tests.support import text_of

pytestmark = pytest.mark.anyio


async def test_a_tool_needs_a_url_elicitation_until_it_is_completed(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    completions: list[str] = []
    completed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completions.append(message.params.elicitation_id)
            completed.set()

    async with direct("urlauth.py", log, message_handler=on_message) as client:
        with anyio.fail_after(20):
            await client.list_tools()
            with pytest.raises(MCPError) as first:
                await client.call_tool("list_files", {"folder": "docs"})
            with pytest.raises(MCPError) as retry:
                await client.call_tool("list_files", {"folder": "docs"})
            required = UrlElicitationRequiredError.from_error(first.value.error).elicitations
            done = await client.call_tool("complete_auth", {"elicitation_id": required[0].elicitation_id})
            await completed.wait()
            listed = await client.call_tool("list_files", {"folder": "docs"})
            again = await client.call_tool("complete_auth", {"elicitation_id": required[0].elicitation_id})

    assert first.value.code == types.URL_ELICITATION_REQUIRED == -32042
    assert first.value.message == "This request requires browser-based authorization."
    (elicitation,) = first.value.error.data["elicitations"]
    assert elicitation == {
        "mode": "url",
        "elicitationId": required[0].elicitation_id,
        "url": f"https://auth.example.com/connect?elicitationId={required[0].elicitation_id}",
        "message": "Authorize access to the example Files service in your browser.",
    }
    assert retry.value.error.data == first.value.error.data  # the same id until completed
    assert text_of(done.content[0]) == "authorized files" and not done.is_error
    assert completions == [required[0].elicitation_id]
    assert text_of(listed.content[0]) == "docs: a.txt, b.txt"
    assert again.is_error
    eid = required[0].elicitation_id
    assert events(log) == [f"required files {eid}", f"required files {eid}", f"completed files {eid}"]


async def test_an_error_lists_every_missing_authorization() -> None:
    async with direct("urlauth.py") as client:
        with anyio.fail_after(20):
            with pytest.raises(MCPError) as both:
                await client.call_tool("sync_all", {})
            files_id = both.value.error.data["elicitations"][0]["elicitationId"]
            await client.call_tool("complete_auth", {"elicitation_id": files_id})
            with pytest.raises(MCPError) as one:
                await client.call_tool("sync_all", {})
            calendar_id = one.value.error.data["elicitations"][0]["elicitationId"]
            await client.call_tool("complete_auth", {"elicitation_id": calendar_id})
            synced = await client.call_tool("sync_all", {})
    assert [e["url"].rsplit("=", 1)[1] for e in both.value.error.data["elicitations"]] == [
        files_id,
        both.value.error.data["elicitations"][1]["elicitationId"],
    ]
    assert len(both.value.error.data["elicitations"]) == 2 and len(one.value.error.data["elicitations"]) == 1
    assert calendar_id == both.value.error.data["elicitations"][1]["elicitationId"]
    assert text_of(synced.content[0]) == "synced files and calendar"
