"""Example backend "defaults": a form elicitation whose schema gives every field a default (SEP-1034).

emceepee's tests spawn it as ``python examples/servers/defaults.py``. It speaks MCP over stdio
(handshake era).

Tools
    profile()
        Sends elicitation/create (form mode) with PROFILE_SCHEMA below: a default for a string,
        a URI (format: uri), an integer, a number, a boolean, a plain enum, a titled enum (oneOf)
        and a multi-select enum, and five of the eight fields required. It does not fill defaults in itself:
        it checks the content it got against the schema and returns it as it came.
          accept, valid    -> text: the content as JSON; structured {"action": "accept", "content": {...}}
          accept, invalid  -> isError: "content does not match the schema: <problems>";
                              structured {"action": "accept", "content": {...}, "problems": [...]}
          decline / cancel -> structured {"action": "..."}
        So a client (or proxy) that answers ``{}`` gets an error unless it applied the defaults.

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, the tool appends one line:
    answer {"action": "...", "content": {...}}     (content only when present)

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import jsonschema
import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAME = "defaults"
log = logging.getLogger(NAME)

PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "default": "Ada Lovelace"},
        "homepage": {
            "type": "string",
            "title": "Homepage",
            "format": "uri",
            "default": "https://example.com/ada",
        },
        "age": {"type": "integer", "title": "Age", "minimum": 0, "default": 36},
        "score": {"type": "number", "title": "Score", "default": 9.5},
        "subscribed": {"type": "boolean", "title": "Subscribe to news", "default": True},
        "plan": {"type": "string", "title": "Plan", "enum": ["free", "pro", "team"], "default": "pro"},
        "color": {
            "type": "string",
            "title": "Colour",
            "oneOf": [{"const": "#FF0000", "title": "Red"}, {"const": "#00FF00", "title": "Green"}],
            "default": "#00FF00",
        },
        "topics": {
            "type": "array",
            "title": "Topics",
            "items": {"type": "string", "enum": ["news", "releases", "events"]},
            "default": ["news"],
        },
    },
    "required": ["name", "age", "subscribed", "plan", "color"],
}


async def profile(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return text_result(f"{NAME} needs a handshake-era connection (protocol <= 2025-11-25)", is_error=True)
    caps = ctx.session.client_capabilities
    if not (caps and caps.elicitation):
        return text_result("client does not support elicitation", is_error=True)
    try:
        answer = await ctx.session.elicit_form(
            "Check your profile (every field has a default).",
            PROFILE_SCHEMA,
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        return text_result(f"elicitation failed: {exc.message}", is_error=True)
    record: dict[str, Any] = {"action": answer.action}
    if answer.content is not None:
        record["content"] = answer.content
    append_event("answer " + json.dumps(record, sort_keys=True))
    if answer.action != "accept":
        return text_result(answer.action, structured=record)
    content = answer.content or {}
    problems = sorted(e.message for e in jsonschema.Draft202012Validator(PROFILE_SCHEMA).iter_errors(content))
    if problems:
        text = f"content does not match the schema: {'; '.join(problems)}"
        return text_result(
            text, is_error=True, structured={**record, "content": content, "problems": problems}
        )
    return text_result(json.dumps(content, sort_keys=True), structured={**record, "content": content})


TOOLS: ToolTable = {
    "profile": (
        types.Tool(
            name="profile",
            description="Ask the user to confirm a profile form whose fields all have defaults.",
            input_schema={"type": "object", "properties": {}},
        ),
        profile,
    ),
}

on_list_tools, on_call_tool = tool_table_handlers(TOOLS)

server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: a form elicitation with defaults (SEP-1034).",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
