"""Plumbing shared by the example backends in this folder (not a backend itself).

Each example is run as a script (``python examples/servers/NAME.py``), which puts this
folder on sys.path, so the examples say ``from _example import ...``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp import MCPError, stdio_server
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext

ToolHandler = Callable[[ServerRequestContext, dict[str, Any]], Awaitable[types.CallToolResult]]
# One entry per tool: its advertised definition and its implementation.
ToolTable = dict[str, tuple[types.Tool, ToolHandler]]

ListTools = Callable[
    [ServerRequestContext, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]
]
CallTool = Callable[[ServerRequestContext, types.CallToolRequestParams], Awaitable[types.CallToolResult]]


def text_result(
    text: str, *, is_error: bool = False, structured: dict[str, Any] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=is_error
    )


def append_event(line: str) -> None:
    """Append one line to $EMCEEPEE_EXAMPLE_LOG, if set (tests read it to see backend-side events)."""
    path = os.environ.get("EMCEEPEE_EXAMPLE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def tool_table_handlers(tools: ToolTable) -> tuple[ListTools, CallTool]:
    """on_list_tools and on_call_tool for a table of tools (read on every request, so it may grow)."""

    async def on_list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool for tool, _ in tools.values()])

    async def on_call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = tools.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        tool, handler = entry
        args = params.arguments or {}
        # The low-level Server does not validate arguments; bad input must not crash a handler.
        problems = [e.message for e in jsonschema.Draft202012Validator(tool.input_schema).iter_errors(args)]
        if problems:
            return text_result(f"invalid arguments for {params.name}: {'; '.join(problems)}", is_error=True)
        return await handler(ctx, args)

    return on_list_tools, on_call_tool


def serve(
    server: Server,
    notifications: NotificationOptions | None = None,
    *,
    tasks: types.ServerTasksCapability | None = None,
) -> None:
    """Serve one client over stdin/stdout until it hangs up; log warnings to stderr as "NAME: LEVEL ...".

    `tasks` adds the server tasks capability, which the SDK does not derive from handlers.
    """
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format=f"{server.name}: %(levelname)s %(message)s"
    )
    options = server.create_initialization_options(notifications)
    options.capabilities.tasks = tasks
    anyio.run(_serve, server, options)


async def _serve(server: Server, options: InitializationOptions) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, options)
