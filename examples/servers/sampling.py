"""Example backend "sampling": a handshake-era server that asks the client's LLM for a completion.

emceepee's tests and demo spawn it as ``python examples/servers/sampling.py`` to exercise
parking a sampling/createMessage request while a tool call is in flight. It speaks MCP
over stdio.

Tools
    summarize(text)
        Sends sampling/createMessage (one user message "Summarize: <text>", max_tokens 100)
        and returns "summary: <text of the completion>".

If the request fails (the client refuses it, has no sampling capability, or it errors),
the tool returns isError=true with the error message. Server-to-client requests only
exist in the handshake era (protocol <= 2025-11-25): a client that negotiated 2026-07-28
gets isError=true saying so (see modern.py for the 2026 way of asking).

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, the tool appends one line
before returning, so tests can see that the backend received the answer:
    answer {"model": "...", "text": "..."}     ("text" is null for a non-text completion)
    error <message>                            (the request failed)

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import mcp_types as types
from _example import append_event, serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAME = "sampling"
log = logging.getLogger(NAME)

# `create_message` is deprecated as of protocol 2026-07-28 but is exactly what a
# handshake-era backend uses; the warning would only add noise to stderr.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SUMMARIZE = types.Tool(
    name="summarize",
    description="Summarize text by asking the client's LLM (sampling/createMessage).",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


def failure(message: str) -> types.CallToolResult:
    append_event(f"error {message}")
    return text_result(message, is_error=True)


async def summarize(ctx: ServerRequestContext, text: str) -> types.CallToolResult:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return failure(
            f"{NAME} needs a handshake-era connection (protocol <= 2025-11-25): "
            f"servers cannot send requests in {ctx.protocol_version}"
        )
    caps = ctx.session.client_capabilities
    if not (caps and caps.sampling):
        return failure("client does not support sampling")
    try:
        # No timeout on purpose: the client may take a long time (or park the request).
        completion = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(text=f"Summarize: {text}"))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        return failure(f"sampling failed: {exc.message}")
    # Without `tools=` the SDK returns a CreateMessageResult whose content is a single block.
    content = completion.content
    answer = content.text if isinstance(content, types.TextContent) else None
    append_event("answer " + json.dumps({"model": completion.model, "text": answer}, sort_keys=True))
    if answer is None:
        return text_result(f"sampling returned {content.type} content, expected text", is_error=True)
    return text_result(f"summary: {answer}")


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[SUMMARIZE])


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name != SUMMARIZE.name:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    text: Any = (params.arguments or {}).get("text")
    # The low-level Server does not validate arguments, so check the one we need.
    if not isinstance(text, str):
        return text_result("invalid arguments for summarize: 'text' must be a string", is_error=True)
    return await summarize(ctx, text)


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: a tool that asks the client's LLM for a completion.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
