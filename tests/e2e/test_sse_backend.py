"""A backend on the legacy HTTP+SSE transport (`transport = "sse"`, tests/backends/sse_echo.py),
over the real `serve`: reached with its configured headers after other calls, and, when its server
answers 401, failed with what to set as a Streamable HTTP backend is (tests/e2e/test_unauthorized.py),
not restarted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support import ROOT, RawHost, example_table, raw_serving, write_config

pytestmark = pytest.mark.anyio

SSE_ECHO = ROOT / "tests" / "backends" / "sse_echo.py"
VAR = "SSE_TOKEN"
SECRET = "S3cr3t-" + os.urandom(6).hex()


@contextmanager
def sse_server(*flags: str) -> Iterator[int]:
    process = subprocess.Popen([sys.executable, str(SSE_ECHO), *flags], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=10)


def sse_table(port: int) -> str:
    return (
        f'[servers.legacy]\nurl = "http://127.0.0.1:{port}/sse"\ntransport = "sse"\n'
        f'headers = {{ Authorization = "Bearer ${{{VAR}}}" }}\n'
    )


def serving(config: Path) -> AbstractAsyncContextManager[RawHost]:
    """A real `serve` with the token in its environment."""
    return raw_serving(config, {**os.environ, VAR: SECRET})


async def call(host: RawHost, server: str, tool: str, **args: Any) -> dict[str, Any]:
    return await host.tool("execute_tool", {"server": server, "tool": tool, "args": args})


async def rows(host: RawHost) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in (await host.tool("list_servers", {}))["servers"]}


async def test_a_tool_call_through_serve_reaches_an_sse_backend_with_its_headers(tmp_path: Path) -> None:
    with sse_server() as port:
        config = write_config(tmp_path / "config.toml", example_table("local", "echo.py"), sse_table(port))
        async with serving(config) as host:
            with anyio.fail_after(60):
                listed = await host.tool("list_tools", {})
                local = await call(host, "local", "echo", text="first")
                echoed = await call(host, "legacy", "echo", text="over sse")
                whoami = await call(host, "legacy", "whoami")
                again = await call(host, "local", "echo", text="after")
                servers = await rows(host)

    tools = {group["server"]: [tool["name"] for tool in group["tools"]] for group in listed["servers"]}
    assert tools["legacy"] == ["echo", "whoami"], listed
    assert local["content"][0]["text"] == "first" and again["content"][0]["text"] == "after"
    assert echoed["content"][0]["text"] == "over sse" and not echoed["is_error"], echoed
    assert whoami["content"][0]["text"] == f"Bearer {SECRET}", whoami  # expanded, sent, passed through
    legacy = servers["legacy"]
    assert legacy["transport"] == "sse" and legacy["status"] == "ready" and legacy["restarts"] == 0


async def test_an_sse_server_refusing_its_stream_is_failed_with_what_to_set_and_not_restarted(
    tmp_path: Path,
) -> None:
    challenge = 'Bearer realm="legacy", error="invalid_token"'
    with sse_server("--status", "401", "--challenge", challenge) as port:
        config = write_config(tmp_path / "config.toml", example_table("local", "echo.py"), sse_table(port))
        async with serving(config) as host:
            with anyio.fail_after(60):
                await host.tool("list_tools", {})
                local = await call(host, "local", "echo", text="unharmed")
                while (await rows(host))["legacy"]["status"] != "failed":
                    await host.tool("await_activity", {"timeout_ms": 1000})
                refused = [await call(host, "legacy", "echo", text=text) for text in ("one", "two")]
                servers = await rows(host)
        counts = httpx2.get(f"http://127.0.0.1:{port}/counts", timeout=10).json()

    said = (
        "Backend 'legacy' requires authorization (HTTP 401 Unauthorized; Bearer realm=\"legacy\", "
        'error="invalid_token"): emceepee sent the header(s) Authorization (values not shown) and the '
        "server did not accept them."
    )
    assert local["content"][0]["text"] == "unharmed"
    assert servers["legacy"]["last_error"] == said and servers["legacy"]["restarts"] == 0, servers
    for reply in refused:
        assert reply["error"]["message"] == said and "Check the token" in reply["error"]["hint"], reply
    assert counts == {"/sse GET": 1}, counts  # one connection, however many calls came after
    assert SECRET not in json.dumps([servers, refused])


async def test_an_sse_server_refusing_a_later_call_fails_that_call_and_the_backend_stays_failed(
    tmp_path: Path,
) -> None:
    insufficient = 'Bearer error="insufficient_scope", scope="files:write"'
    with sse_server("--status", "403", "--deny-from", "tools/call", "--challenge", insufficient) as port:
        config = write_config(tmp_path / "config.toml", sse_table(port))
        async with serving(config) as host:
            with anyio.fail_after(60):
                (listed,) = (await host.tool("list_tools", {"server": "legacy"}))["servers"]
                first = await call(host, "legacy", "echo", text="hi")
                while (await rows(host))["legacy"]["status"] != "failed":
                    await host.tool("await_activity", {"timeout_ms": 1000})
                later = await call(host, "legacy", "echo", text="again")
                servers = await rows(host)
        counts = httpx2.get(f"http://127.0.0.1:{port}/counts", timeout=10).json()

    said = (
        "Backend 'legacy' requires authorization (HTTP 403 Forbidden; Bearer error=\"insufficient_scope\", "
        'scope="files:write"): emceepee sent the header(s) Authorization (values not shown) and the server '
        "did not accept them."
    )
    assert [tool["name"] for tool in listed["tools"]] == ["echo", "whoami"]  # ready before the refusal
    assert first["error"]["message"] == said and "not allowed this" in first["error"]["hint"], first
    assert later["error"]["message"] == said
    assert servers["legacy"]["last_error"] == said and servers["legacy"]["restarts"] == 0, servers
    assert counts["/sse GET"] == 1 and counts["/messages/ tools/call"] == 1, counts
