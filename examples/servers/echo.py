"""Example backend "echo": a well-behaved MCP server that exercises most of the protocol.

emceepee's tests and demo spawn it as ``python examples/servers/echo.py``; it speaks
MCP over stdio and is meant to be connected to in the handshake era (``initialize``).

Tools
    echo(text)               -> the same text; also sends a log message (level info)
    add(a, b)                -> the sum, as text and as structured content {"sum": ...}
    slow(seconds, steps=5)   -> sleeps in ``steps`` increments, reporting progress each step
    fail(message)            -> a tool error (isError=true) carrying ``message``
    structured()             -> structured content {"items": [1, 2, 3], "ok": true} plus text
    add_tool(name)           -> registers a new argument-less tool ``name`` (which returns its
                                own name) and sends notifications/tools/list_changed
Resources
    echo://readme            (text/plain)
    echo://items/{item_id}   (template) -> "item <item_id>"
Prompts
    greet(name, style?)      -> one user message "Say hello to <name>..."

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, ``slow`` appends
``started slow`` when it starts and ``cancelled slow`` when it is cancelled, so tests
can see what happened on the backend's side of the wire.

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import anyio
import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.tool_name_validation import validate_tool_name
from mcp.shared.uri_template import UriTemplate

NAME = "echo"
log = logging.getLogger(NAME)

# `send_log_message` is deprecated as of protocol 2026-07-28 but is exactly what a
# handshake-era backend uses; the warning would only add noise to stderr.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


def object_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


# --------------------------------------------------------------------------- tools


async def echo(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    text: str = args["text"]
    # A log notification lets tests check that the proxy relays notifications/message.
    # (In the 2026-07-28 era the SDK drops it unless the request opted in to logs.)
    await ctx.session.send_log_message("info", f"echo called with {text!r}", logger=NAME)
    return text_result(text)


async def add(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    total = args["a"] + args["b"]
    # Text for clients that ignore structured content, structured for those that read it.
    return text_result(str(total), structured={"sum": total})


async def slow(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    seconds: float = args["seconds"]
    steps: int = args.get("steps", 5)
    append_event("started slow")
    try:
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            # A no-op unless the caller sent a progressToken.
            await ctx.session.report_progress(step, steps, f"step {step}/{steps}")
    except anyio.get_cancelled_exc_class():
        # notifications/cancelled arrives as anyio cancellation at the next await.
        # Record it (synchronously: we must not await while cancelled) and let it propagate.
        append_event("cancelled slow")
        log.info("slow was cancelled")
        raise
    return text_result(f"slept {seconds:g} s")


async def fail(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    # A tool-level failure is a *result* with isError, not a JSON-RPC error.
    return text_result(args["message"], is_error=True)


STRUCTURED_VALUE: dict[str, Any] = {"items": [1, 2, 3], "ok": True}


async def structured(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    # The spec asks tools with structured output to also serialise it as text.
    return text_result(json.dumps(STRUCTURED_VALUE), structured=STRUCTURED_VALUE)


async def add_tool(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    name: str = args["name"]
    if name in TOOLS:
        return text_result(f"tool {name!r} already exists", is_error=True)
    check = validate_tool_name(name)
    if not check.is_valid:
        return text_result(f"invalid tool name {name!r}: {'; '.join(check.warnings)}", is_error=True)

    async def dynamic(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(name)

    TOOLS[name] = (
        types.Tool(
            name=name, description=f"Added at runtime; returns {name!r}", input_schema=object_schema({})
        ),
        dynamic,
    )
    # Sent before the result, so a client sees the notification before add_tool returns.
    await ctx.session.send_tool_list_changed()
    log.info("added tool %r", name)
    return text_result(name)


# One entry per tool: its advertised definition and its implementation. add_tool mutates this
# table; one process serves one stdio connection, so module-level state is per-client state.
TOOLS: ToolTable = {
    "echo": (
        types.Tool(
            name="echo",
            description="Return the given text unchanged (and send an info log message).",
            input_schema=object_schema({"text": {"type": "string"}}, ["text"]),
        ),
        echo,
    ),
    "add": (
        types.Tool(
            name="add",
            description="Add two numbers.",
            input_schema=object_schema({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
            output_schema=object_schema({"sum": {"type": "number"}}, ["sum"]),
        ),
        add,
    ),
    "slow": (
        types.Tool(
            name="slow",
            description="Sleep for `seconds`, reporting progress `steps` times.",
            input_schema=object_schema(
                {
                    "seconds": {"type": "number", "minimum": 0},
                    "steps": {"type": "integer", "minimum": 1, "default": 5},
                },
                ["seconds"],
            ),
        ),
        slow,
    ),
    "fail": (
        types.Tool(
            name="fail",
            description="Always fail with the given message (isError=true).",
            input_schema=object_schema({"message": {"type": "string"}}, ["message"]),
        ),
        fail,
    ),
    "structured": (
        types.Tool(
            name="structured",
            description='Return structured content {"items": [1, 2, 3], "ok": true}.',
            input_schema=object_schema({}),
            output_schema=object_schema(
                {"items": {"type": "array", "items": {"type": "integer"}}, "ok": {"type": "boolean"}},
                ["items", "ok"],
            ),
        ),
        structured,
    ),
    "add_tool": (
        types.Tool(
            name="add_tool",
            description="Register a new tool called `name` (it returns its own name).",
            input_schema=object_schema({"name": {"type": "string"}}, ["name"]),
        ),
        add_tool,
    ),
}


# Both read TOOLS on every request, so they see the tools add_tool registers. on_call_tool checks
# the arguments against the tool's input schema before calling its handler.
on_list_tools, on_call_tool = tool_table_handlers(TOOLS)


# --------------------------------------------------------------------------- resources

README_URI = "echo://readme"
README_TEXT = (
    "This is the echo example backend for emceepee.\n"
    "Tools: echo, add, slow, fail, structured, add_tool.\n"
    "Try the template echo://items/{item_id}.\n"
)
ITEM_TEMPLATE = UriTemplate.parse("echo://items/{item_id}")


async def on_list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri=README_URI, name="readme", description="About this server", mime_type="text/plain"
            )
        ]
    )


async def on_list_resource_templates(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template="echo://items/{item_id}",
                name="item",
                description="An item by id",
                mime_type="text/plain",
            )
        ]
    )


async def on_read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    if params.uri == README_URI:
        text = README_TEXT
    elif (match := ITEM_TEMPLATE.match(params.uri)) is not None:
        text = f"item {match['item_id']}"
    else:
        # INVALID_PARAMS for an unknown URI, as MCPServer does (SEP-2164).
        raise MCPError(types.INVALID_PARAMS, f"Unknown resource: {params.uri}")
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=params.uri, mime_type="text/plain", text=text)]
    )


# --------------------------------------------------------------------------- prompts


async def on_list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name="greet",
                description="Ask the model to greet someone.",
                arguments=[
                    types.PromptArgument(name="name", description="Who to greet", required=True),
                    types.PromptArgument(name="style", description="e.g. formal, pirate", required=False),
                ],
            )
        ]
    )


async def on_get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != "greet":
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    args = params.arguments or {}
    if not args.get("name"):
        raise MCPError(types.INVALID_PARAMS, "Missing required argument: name")
    text = f"Say hello to {args['name']}"
    text += f" in a {args['style']} style." if args.get("style") else "."
    return types.GetPromptResult(
        description="A greeting",
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
    )


# --------------------------------------------------------------------------- main

server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: echo, add, slow, fail, structured, add_tool.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    on_list_resources=on_list_resources,
    on_list_resource_templates=on_list_resource_templates,
    on_read_resource=on_read_resource,
    on_list_prompts=on_list_prompts,
    on_get_prompt=on_get_prompt,
)


if __name__ == "__main__":
    log.setLevel(logging.INFO)
    # add_tool changes the tool list, so advertise tools.listChanged (handshake era).
    serve(server, NotificationOptions(tools_changed=True))
