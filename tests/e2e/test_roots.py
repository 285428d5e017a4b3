"""Roots over the real `serve`: a backend asking roots/list gets its own configured roots, else the
host's (fetched once, refetched on the host's list_changed, which the backend is told of), else the
[defaults] roots; a host that fails roots/list costs one request and leaves the defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from tests.support import HOSTILE, example_table, serving, still_answering, texts, until_ready, write_config

pytestmark = pytest.mark.anyio


def dirs(tmp_path: Path, *names: str) -> list[Path]:
    made = [tmp_path / name for name in names]
    for path in made:
        path.mkdir()
    return made


async def roots_of(client: Client, server: str, tool: str = "list_roots") -> dict[str, Any]:
    result = await client.call_tool("execute_tool", {"server": server, "tool": tool, "args": {}})
    assert not result.is_error and result.structured_content is not None, result
    return dict(result.structured_content)


async def backend_log_says(log: Path, line: str) -> None:
    with anyio.fail_after(20):
        while True:
            if log.exists() and line in log.read_text().splitlines():
                return
            await anyio.sleep(0.05)  # the backend writes its log in another process: poll it


async def test_configured_roots_reach_backends_of_a_host_without_roots(tmp_path: Path) -> None:
    own, shared = dirs(tmp_path, "app", "shared")
    config = write_config(
        tmp_path / "config.toml",
        f"[defaults]\nroots = [{json.dumps(str(shared))}]\n",
        example_table("own", "roots.py", roots=[str(own)]),
        example_table("other", "roots.py"),
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            names = [tool["name"] for tool in (await until_ready(client, "own"))["own"]]
            mine = await roots_of(client, "own")
            theirs = await roots_of(client, "other")
            kept = await roots_of(client, "other", "known_roots")
    assert names == ["list_roots", "known_roots"]  # the backend saw the roots capability
    assert mine["roots"] == [{"uri": own.resolve().as_uri(), "name": "app"}]
    assert theirs["roots"] == [{"uri": shared.resolve().as_uri(), "name": "shared"}]
    assert kept["roots"] == theirs["roots"]


async def test_host_roots_are_asked_once_and_a_change_reaches_the_backend(tmp_path: Path) -> None:
    (shared,) = dirs(tmp_path, "shared")
    log = tmp_path / "backend.log"
    config = write_config(
        tmp_path / "config.toml",
        f"[defaults]\nroots = [{json.dumps(str(shared))}]\n",
        example_table("r", "roots.py", env={"EMCEEPEE_EXAMPLE_LOG": str(log)}),
    )
    roots = [types.Root(uri=FileUrl("file:///home/u/app"), name="app")]
    asked = 0

    async def on_list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        nonlocal asked
        asked += 1
        return types.ListRootsResult(roots=roots)

    async with serving(config, list_roots_callback=on_list_roots) as client:
        with anyio.fail_after(60):
            await client.list_tools()
            first = [await roots_of(client, "r") for _ in range(5)]  # a backend asking again and again
            asked_before = asked
            roots.append(types.Root(uri=FileUrl("file:///home/u/lib")))
            await client.session.send_notification(types.RootsListChangedNotification())
            await backend_log_says(log, "roots file:///home/u/app file:///home/u/lib")
            after = await roots_of(client, "r")
            await still_answering(client)
    assert all(one["roots"] == [{"uri": "file:///home/u/app", "name": "app"}] for one in first)
    assert asked_before == 1
    assert after["roots"][-1] == {"uri": "file:///home/u/lib"}
    assert asked == 2


async def test_a_host_that_fails_roots_list_is_asked_once_and_backends_get_the_defaults(
    tmp_path: Path,
) -> None:
    (shared,) = dirs(tmp_path, "shared")
    config = write_config(
        tmp_path / "config.toml",
        f"[defaults]\nroots = [{json.dumps(str(shared))}]\n",
        example_table("r", "roots.py"),
    )
    asked = 0

    async def failing(ctx: ClientRequestContext) -> types.ErrorData:
        nonlocal asked
        asked += 1
        return types.ErrorData(code=types.INTERNAL_ERROR, message="roots are broken here")

    async with serving(config, list_roots_callback=failing) as client:
        with anyio.fail_after(60):
            await client.list_tools()
            answers = [await roots_of(client, "r") for _ in range(5)]
            await still_answering(client)
    assert all(one["roots"] == [{"uri": shared.resolve().as_uri(), "name": "shared"}] for one in answers)
    assert asked == 1


async def test_a_2026_backend_asking_roots_in_an_input_round_gets_the_same_roots(tmp_path: Path) -> None:
    own, shared = dirs(tmp_path, "app", "shared")
    asker = str(HOSTILE.parent / "roots_asker.py")
    config = write_config(
        tmp_path / "config.toml",
        f"[defaults]\nroots = [{json.dumps(str(shared))}]\n",
        example_table("own", asker, protocol="modern", roots=[str(own)]),
        example_table("other", asker, protocol="modern"),
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            await until_ready(client, "own", "other")
            mine = await client.call_tool("execute_tool", {"server": "own", "tool": "where", "args": {}})
            theirs = await client.call_tool("execute_tool", {"server": "other", "tool": "where", "args": {}})
    assert texts(mine) == [own.resolve().as_uri()]
    assert texts(theirs) == [shared.resolve().as_uri()]
