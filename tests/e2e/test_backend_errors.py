"""A backend's JSON-RPC error reaches the host said once, with the next thing to do."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support import hostile_table, serving, still_answering, write_config

pytestmark = pytest.mark.anyio


async def test_a_backend_error_is_quoted_without_its_doubled_code_and_with_a_hint(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            bad_args = await client.call_tool(
                "execute_tool",
                {
                    "server": "h",
                    "tool": "rpc_error",
                    "args": {"code": -32602, "message": "MCP error -32602: Resource demo://nope not found"},
                },
            )
            internal = await client.call_tool(
                "execute_tool",
                {"server": "h", "tool": "rpc_error", "args": {"code": -32603, "message": "it broke"}},
            )
            await still_answering(client)
    error = bad_args.structured_content["error"]
    assert bad_args.is_error and error["message"] == (
        "Backend 'h' answered tools/call 'rpc_error' with error -32602: Resource demo://nope not found"
    )
    assert error["hint"] == "Check the name and arguments against list_tools(server='h'), then call again."
    other = internal.structured_content["error"]
    assert other["message"].endswith("with error -32603: it broke")
    assert "get_logs(server='h')" in other["hint"]
