"""Example backend "many": lots of tools, resources and prompts, served in pages of 5.

emceepee's tests spawn it as ``python examples/servers/many_tools.py`` to check that
every list is walked to the end (a client that reads only the first page sees 5 tools).
It speaks MCP over stdio.

Tools       tool_01 ... tool_40   description "Tool number N", input {n: integer},
                                  returns "tool_NN got <n>"
Resources   many://resources/01 ... many://resources/12   (text/plain, "resource NN")
Prompts     prompt_01 ... prompt_07                       (no arguments, one user message)

tools/list, resources/list and prompts/list each return at most PAGE_SIZE (5) entries and
a nextCursor until the last page. Cursors are opaque to clients; an unknown one is
rejected with INVALID_PARAMS.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

import mcp_types as types
from _example import serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

NAME = "many"
PAGE_SIZE = 5

T = TypeVar("T")

TOOLS = [
    types.Tool(
        name=f"tool_{i:02d}",
        description=f"Tool number {i}",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    for i in range(1, 41)
]
TOOL_NAMES = {tool.name for tool in TOOLS}

RESOURCES = [
    types.Resource(uri=f"many://resources/{i:02d}", name=f"resource_{i:02d}", mime_type="text/plain")
    for i in range(1, 13)
]
RESOURCE_URI = re.compile(r"many://resources/(\d\d)")

PROMPTS = [types.Prompt(name=f"prompt_{i:02d}", description=f"Prompt number {i}") for i in range(1, 8)]
PROMPT_NAMES = {prompt.name for prompt in PROMPTS}


def paginate(items: Sequence[T], params: types.PaginatedRequestParams | None) -> tuple[list[T], str | None]:
    """Return the page that starts at the request's cursor, and the cursor of the next page.

    The cursor is simply the offset of the page as a string; clients must treat it as opaque.
    """
    cursor = params.cursor if params else None
    if cursor is None:
        start = 0
    elif cursor.isdigit() and 0 < int(cursor) < len(items):
        start = int(cursor)
    else:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
    end = start + PAGE_SIZE
    return list(items[start:end]), (str(end) if end < len(items) else None)


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    page, next_cursor = paginate(TOOLS, params)
    return types.ListToolsResult(tools=page, next_cursor=next_cursor)


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name not in TOOL_NAMES:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    n = (params.arguments or {}).get("n")
    # The low-level Server does not validate arguments, so check the one we use.
    if not isinstance(n, int) or isinstance(n, bool):
        return text_result(f"invalid arguments for {params.name}: 'n' must be an integer", is_error=True)
    return text_result(f"{params.name} got {n}")


async def on_list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    page, next_cursor = paginate(RESOURCES, params)
    return types.ListResourcesResult(resources=page, next_cursor=next_cursor)


async def on_read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    match = RESOURCE_URI.fullmatch(params.uri)
    if match is None or not 1 <= int(match[1]) <= len(RESOURCES):
        raise MCPError(types.INVALID_PARAMS, f"Unknown resource: {params.uri}")
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri=params.uri, mime_type="text/plain", text=f"resource {match[1]}")
        ]
    )


async def on_list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    page, next_cursor = paginate(PROMPTS, params)
    return types.ListPromptsResult(prompts=page, next_cursor=next_cursor)


async def on_get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name not in PROMPT_NAMES:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=f"This is {params.name}."))]
    )


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: 40 tools, 12 resources, 7 prompts, 5 per page.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    on_list_resources=on_list_resources,
    on_read_resource=on_read_resource,
    on_list_prompts=on_list_prompts,
    on_get_prompt=on_get_prompt,
)


if __name__ == "__main__":
    serve(server)
