"""The benchmark's SDK backend: the tiny backend's tools (`tiny_backend.py`) on the SDK's low-level
`Server`, which is what most Python MCP servers are built on.

    python benchmarks/sdk_backend.py
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import stdio_server
from mcp.server import Server, ServerRequestContext
from tiny_backend import TOOLS


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        return text(str(args.get("text", "")))
    if params.name == "slow":
        await anyio.sleep(float(args.get("seconds", 0)))
        return text("done")
    if params.name == "blob":
        return text("x" * int(args.get("size", 0)))
    steps = int(args.get("steps", 3))
    for step in range(1, steps + 1):
        await anyio.sleep(float(args.get("seconds", 0.01)))
        await ctx.session.report_progress(step, steps)
    return text("done")


async def main() -> None:
    server: Server[Any] = Server("sdk-bench", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
