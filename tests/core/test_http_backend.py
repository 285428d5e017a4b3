"""A remote backend over Streamable HTTP, with headers from the config (secrets via ${VAR})."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support import ROOT, emceepee, payload, texts, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def http_backend() -> Iterator[int]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "backends" / "http_echo.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_a_remote_backend_is_reached_with_its_configured_headers(
    tmp_path: Path, http_backend: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_TOKEN", "s3cret")
    config = write_config(
        tmp_path / "config.toml",
        f'[servers.remote]\nurl = "http://127.0.0.1:{http_backend}/mcp"\n'
        'headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }\n',
    )
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "execute_tool", {"server": "remote", "tool": "whoami", "args": {}}
            )
            servers = payload(await client.call_tool("list_servers", {}))["servers"]
    assert texts(result) == ["Bearer s3cret"]
    assert servers[0]["transport"] == "http" and servers[0]["status"] == "ready" and "pid" not in servers[0]


async def test_a_remote_backend_answering_minus_32000_fails_that_call_and_stays_connected(
    tmp_path: Path, http_backend: int
) -> None:
    config = write_config(
        tmp_path / "config.toml", f'[servers.remote]\nurl = "http://127.0.0.1:{http_backend}/mcp"\n'
    )
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool("list_tools", {"server": "remote"})
            first = await client.call_tool("execute_tool", {"server": "remote", "tool": "whoami", "args": {}})
            failed = await client.call_tool(
                "execute_tool", {"server": "remote", "tool": "rpc_error", "args": {}}
            )
            again = await client.call_tool("execute_tool", {"server": "remote", "tool": "whoami", "args": {}})
            servers = payload(await client.call_tool("list_servers", {}))["servers"]
    assert texts(first) == texts(again) == ["none"]
    assert failed.is_error and failed.structured_content["error"]["message"] == (
        "Backend 'remote' answered tools/call 'rpc_error' with error -32000: quota exceeded"
    )
    assert servers[0]["status"] == "ready" and servers[0]["restarts"] == 0
