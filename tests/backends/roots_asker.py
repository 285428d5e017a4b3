"""A 2026-07-28 backend whose one tool asks the client for its roots in an input round (SDK).

    python tests/backends/roots_asker.py

    where()   round 1: inputRequests {"roots": roots/list}; round 2: the root URIs, one per line
              ("no roots" for an empty list). In the handshake era it asks over the session.

Everything diagnostic goes to stderr; stdout is the protocol wire.
"""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

WHERE = types.Tool(name="where", input_schema={"type": "object"})


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[WHERE])


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (params.input_responses or {}).get("roots")
        if not isinstance(answer, types.ListRootsResult):
            return types.InputRequiredResult(
                input_requests={"roots": types.ListRootsRequest()}, request_state="asked"
            )
    else:
        answer = await ctx.session.list_roots()
    uris = [str(root.uri) for root in answer.roots]
    return types.CallToolResult(content=[types.TextContent(text="\n".join(uris) or "no roots")])


server = Server("roots_asker", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
