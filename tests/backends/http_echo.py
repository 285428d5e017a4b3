"""A Streamable HTTP MCP backend for the tests: prints its port, then serves on 127.0.0.1.

Tool `whoami` answers with the Authorization header the request carried, so a test can see
that emceepee sent the configured (and `${VAR}`-expanded) headers. Tool `rpc_error` answers with
the JSON-RPC error -32000 "quota exceeded" (the code the SDK also uses for a closed connection).
"""

from __future__ import annotations

import io
import socket
import sys

import anyio
import mcp_types as types
import uvicorn
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

WHOAMI = types.Tool(
    name="whoami",
    description="The Authorization header of this request.",
    input_schema={"type": "object", "properties": {}},
)
RPC_ERROR = types.Tool(
    name="rpc_error",
    description="Answers with the JSON-RPC error -32000.",
    input_schema={"type": "object", "properties": {}},
)


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[WHOAMI, RPC_ERROR])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "rpc_error":
        raise MCPError(code=types.CONNECTION_CLOSED, message="quota exceeded")
    headers = getattr(ctx.request, "headers", {}) or {}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=headers.get("authorization", "none"))]
    )


async def main() -> None:
    app = Server("http-echo", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)  # a script's stdout; the port line must not wait
    sys.stdout.reconfigure(line_buffering=True)
    anyio.run(main)
