"""Example backend "chain": tools whose results suggest the next tool to call.

emceepee's tests spawn it as ``python examples/servers/chain.py``; it speaks MCP over stdio
(handshake era). A suggestion rides in the result's ``_meta``, as tool-chaining metadata:

    "_meta": {"nextTool": {"tool": "step_b", "arguments": {"value": "x", "via": "step_a"}}}

A client that follows suggestions must check that the tool is listed, that the arguments pass
its input schema, that the chain is not too deep and that it does not loop; the tools below
exercise each of those checks. Every result says which step ran and with what arguments, as
text (``<tool> got <arguments as JSON>``) and as structured content
``{"step": <tool>, "arguments": {...}}``.

Tools
    step_a(value)            -> suggests step_b(value, via="step_a")
    step_b(value, via)       -> suggests step_c(value, via="step_b")
    step_c(value, via)       -> ends the chain (no suggestion)
    cycle_x(n)               -> suggests cycle_y(n)
    cycle_y(n)               -> suggests cycle_x(n): the same call as the one that led here
    bad_next()               -> suggests step_b({"value": 42}): fails step_b's input schema
                                (value must be a string, via is required)
    missing_next()           -> suggests no_such_tool({}), a tool this server does not list
    openai_next(value)       -> suggests step_b(value, via="openai_next") under
                                ``_meta["openai/nextTool"]`` instead of ``_meta.nextTool``
    make_draft(title)        -> suggests delete_draft(draft_id="draft-<title>")
    delete_draft(draft_id)   -> annotated destructiveHint=true (readOnlyHint=false); ends
    countdown(n)             -> suggests countdown(n - 1) while n > 0; countdown(0) ends, so
                                countdown(n) is a chain of n + 1 calls (countdown(7): 8 calls)
    fail_next()              -> a tool error (isError=true) that still suggests step_c(value=
                                "recovered", via="fail_next"), as an error-recovery chain would

Arguments are checked against each tool's input schema; a call that fails it gets a tool error
(isError=true) naming the problem, and runs nothing.

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, every call that runs appends
``called <tool> <arguments as JSON>`` to it, so tests can see which steps reached the backend
(for instance, that a refused delete_draft never ran).

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp.server import Server, ServerRequestContext

NAME = "chain"
NEXT_TOOL = "nextTool"
OPENAI_NEXT_TOOL = "openai/nextTool"


def object_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


STRING = {"type": "string"}
COUNT = {"type": "integer", "minimum": 0}


def step(
    tool: str, args: dict[str, Any], next_tool: str | None = None, next_args: dict[str, Any] | None = None
) -> types.CallToolResult:
    """What every tool returns: which step ran, with what, and (maybe) what to call next."""
    return suggest(ran(tool, args), next_tool, next_args)


def ran(tool: str, args: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    append_event(f"called {tool} {json.dumps(args, sort_keys=True)}")
    result = text_result(f"{tool} got {json.dumps(args, sort_keys=True)}", is_error=is_error)
    return result.model_copy(update={"structured_content": {"step": tool, "arguments": args}})


def suggest(
    result: types.CallToolResult,
    next_tool: str | None,
    next_args: dict[str, Any] | None = None,
    key: str = NEXT_TOOL,
) -> types.CallToolResult:
    if next_tool is None:
        return result
    suggestion: dict[str, Any] = {"tool": next_tool}
    if next_args is not None:
        suggestion["arguments"] = next_args
    return result.model_copy(update={"meta": {key: suggestion}})


# --------------------------------------------------------------------------- tools


async def step_a(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("step_a", args, "step_b", {"value": args["value"], "via": "step_a"})


async def step_b(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("step_b", args, "step_c", {"value": args["value"], "via": "step_b"})


async def step_c(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("step_c", args)


async def cycle_x(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("cycle_x", args, "cycle_y", {"n": args["n"]})


async def cycle_y(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("cycle_y", args, "cycle_x", {"n": args["n"]})


async def bad_next(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    # Breaks the server's side of the contract on purpose: the arguments fail step_b's schema.
    return step("bad_next", args, "step_b", {"value": 42})


async def missing_next(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("missing_next", args, "no_such_tool", {})


async def openai_next(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    result = ran("openai_next", args)
    return suggest(result, "step_b", {"value": args["value"], "via": "openai_next"}, key=OPENAI_NEXT_TOOL)


async def make_draft(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("make_draft", args, "delete_draft", {"draft_id": f"draft-{args['title']}"})


async def delete_draft(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return step("delete_draft", args)


async def countdown(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    n: int = args["n"]
    return step("countdown", args, "countdown", {"n": n - 1}) if n > 0 else step("countdown", args)


async def fail_next(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    result = ran("fail_next", args, is_error=True)
    return suggest(result, "step_c", {"value": "recovered", "via": "fail_next"})


def tool(
    name: str,
    description: str,
    schema: dict[str, Any],
    annotations: types.ToolAnnotations | None = None,
) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema, annotations=annotations)


VALUE = object_schema({"value": STRING}, ["value"])
VALUE_VIA = object_schema({"value": STRING, "via": STRING}, ["value", "via"])
N = object_schema({"n": COUNT}, ["n"])
NOTHING = object_schema({})

TOOLS: ToolTable = {
    "step_a": (tool("step_a", "First step of a three-step chain; suggests step_b.", VALUE), step_a),
    "step_b": (tool("step_b", "Second step; suggests step_c.", VALUE_VIA), step_b),
    "step_c": (tool("step_c", "Last step of the chain; suggests nothing.", VALUE_VIA), step_c),
    "cycle_x": (tool("cycle_x", "Suggests cycle_y with the same n.", N), cycle_x),
    "cycle_y": (tool("cycle_y", "Suggests cycle_x with the same n (a loop).", N), cycle_y),
    "bad_next": (tool("bad_next", "Suggests step_b with arguments that fail its schema.", NOTHING), bad_next),
    "missing_next": (tool("missing_next", "Suggests a tool that does not exist.", NOTHING), missing_next),
    "openai_next": (
        tool("openai_next", 'Suggests step_b under _meta["openai/nextTool"].', VALUE),
        openai_next,
    ),
    "make_draft": (
        tool(
            "make_draft",
            "Makes a draft, then suggests deleting it.",
            object_schema({"title": STRING}, ["title"]),
        ),
        make_draft,
    ),
    "delete_draft": (
        tool(
            "delete_draft",
            "Deletes a draft (destructive).",
            object_schema({"draft_id": STRING}, ["draft_id"]),
            types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
        ),
        delete_draft,
    ),
    "countdown": (tool("countdown", "Suggests countdown(n - 1) until n is 0.", N), countdown),
    "fail_next": (
        tool("fail_next", "Fails (isError), yet suggests step_c to recover.", NOTHING),
        fail_next,
    ),
}

# on_call_tool checks the arguments against the tool's input schema before calling its handler.
on_list_tools, on_call_tool = tool_table_handlers(TOOLS)

server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: results that suggest the next tool (_meta.nextTool).",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
