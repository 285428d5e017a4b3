"""The "roots" example backend, driven directly: it asks the client for roots and follows changes."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from tests.examples.direct import direct, events
from tests.support import text_of

pytestmark = pytest.mark.anyio


async def test_without_roots_only_list_roots_is_listed_and_it_says_why_it_fails() -> None:
    async with direct("roots.py") as client:
        with anyio.fail_after(20):
            names = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("list_roots", {})
    assert names == ["list_roots"]
    assert result.is_error and "did not declare the roots capability" in text_of(result.content[0])


async def test_roots_reach_the_backend_and_a_change_is_followed(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    roots = [types.Root(uri=FileUrl("file:///home/u/app"), name="app")]
    asked = [anyio.Event(), anyio.Event(), anyio.Event()]
    calls = 0

    async def on_list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        nonlocal calls
        calls += 1
        asked[min(calls, len(asked)) - 1].set()
        return types.ListRootsResult(roots=roots)

    async with direct("roots.py", log, list_roots_callback=on_list_roots) as client:
        with anyio.fail_after(20):
            names = [tool.name for tool in (await client.list_tools()).tools]
            now = await client.call_tool("list_roots", {})
            first = await client.call_tool("known_roots", {})
            roots.append(types.Root(uri=FileUrl("file:///home/u/lib")))
            await client.session.send_notification(types.RootsListChangedNotification())
            await asked[2].wait()  # fetched at start, by list_roots, and after the change
            second = await client.call_tool("known_roots", {})
    assert names == ["list_roots", "known_roots"]
    assert now.structured_content == {"roots": [{"uri": "file:///home/u/app", "name": "app"}]}
    assert text_of(now.content[0]) == "file:///home/u/app app"
    assert first.structured_content == {"roots": [{"uri": "file:///home/u/app", "name": "app"}], "changes": 0}
    assert second.structured_content == {
        "roots": [{"uri": "file:///home/u/app", "name": "app"}, {"uri": "file:///home/u/lib"}],
        "changes": 1,
    }
    assert events(log) == [
        "roots file:///home/u/app",
        "roots changed",
        "roots file:///home/u/app file:///home/u/lib",
    ]
