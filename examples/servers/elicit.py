"""Example backend "elicit": a handshake-era server that asks the client questions mid-call.

emceepee's tests and demo spawn it as ``python examples/servers/elicit.py`` to exercise
parking an elicitation while a tool call is in flight. It speaks MCP over stdio.

Tools
    ask(question="What is your name?")
        Sends elicitation/create (form mode) with the schema
        {name: string (required), age: integer >= 0, color: "red" | "green" | "blue"}
        and returns "hello <name>" on accept, "declined" / "cancelled" otherwise.
    ask_url()
        Sends a URL-mode elicitation for https://example.com/authorize?x=1 and returns
        the action the client chose ("accept", "decline" or "cancel").

If the elicitation itself fails (the client refuses it, has no elicitation capability,
or the request errors), the tool returns isError=true with the error message.

Server-to-client requests only exist in the handshake era (protocol <= 2025-11-25): a
client that negotiated 2026-07-28 gets isError=true saying so (see modern.py for the
2026 way of asking).

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, each tool appends one
line before returning, so tests can see that the backend received the answer:
    answer {"action": "accept", "content": {...}}     (content only when present)
    error <message>                                   (the elicitation failed)

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAME = "elicit"
log = logging.getLogger(NAME)

AUTHORIZE_URL = "https://example.com/authorize?x=1"

# The form the client is asked to fill in. "enumNames" gives the choices display labels
# (the spec's older titled-enum form; newer clients also understand "oneOf" with titles).
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "age": {"type": "integer", "title": "Age", "minimum": 0},
        "color": {
            "type": "string",
            "title": "Favourite colour",
            "enum": ["red", "green", "blue"],
            "enumNames": ["Red", "Green", "Blue"],
        },
    },
    "required": ["name"],
}


def record_answer(answer: types.ElicitResult) -> None:
    record: dict[str, Any] = {"action": answer.action}
    if answer.content is not None:
        record["content"] = answer.content
    append_event("answer " + json.dumps(record, sort_keys=True))


def cannot_elicit(ctx: ServerRequestContext, mode: str) -> str | None:
    """Why we may not send an elicitation of this mode to this client, or None if we may."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return (
            f"{NAME} needs a handshake-era connection (protocol <= 2025-11-25): "
            f"servers cannot send requests in {ctx.protocol_version}"
        )
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps else None
    if elicitation is None:
        return "client does not support elicitation"
    # A bare `elicitation: {}` predates URL mode and means form-only.
    if mode == "url" and elicitation.url is None:
        return "client does not support URL-mode elicitation"
    return None


async def ask(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    if reason := cannot_elicit(ctx, "form"):
        append_event(f"error {reason}")
        return text_result(reason, is_error=True)
    question: str = args.get("question", "What is your name?")
    try:
        # No timeout on purpose: a human (or a parked proxy) may take minutes to answer.
        answer = await ctx.session.elicit_form(question, PERSON_SCHEMA, related_request_id=ctx.request_id)
    except MCPError as exc:
        append_event(f"error {exc.message}")
        return text_result(f"elicitation failed: {exc.message}", is_error=True)
    record_answer(answer)
    if answer.action == "accept":
        name = (answer.content or {}).get("name")
        if not isinstance(name, str) or not name:
            # The SDK checks only the shape of the answer, not the schema, so check it here.
            return text_result("elicitation accepted without a name", is_error=True)
        return text_result(f"hello {name}")
    return text_result("declined" if answer.action == "decline" else "cancelled")


async def ask_url(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    if reason := cannot_elicit(ctx, "url"):
        append_event(f"error {reason}")
        return text_result(reason, is_error=True)
    try:
        answer = await ctx.session.elicit_url(
            "Please authorize the example app in your browser.",
            AUTHORIZE_URL,
            elicitation_id=uuid.uuid4().hex,
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        append_event(f"error {exc.message}")
        return text_result(f"elicitation failed: {exc.message}", is_error=True)
    record_answer(answer)
    return text_result(answer.action)


TOOLS: ToolTable = {
    "ask": (
        types.Tool(
            name="ask",
            description="Ask the user for their name (and optionally age and colour) via a form elicitation.",
            input_schema={
                "type": "object",
                "properties": {"question": {"type": "string", "default": "What is your name?"}},
            },
        ),
        ask,
    ),
    "ask_url": (
        types.Tool(
            name="ask_url",
            description="Send the user to an authorization URL (URL-mode elicitation); returns their action.",
            input_schema={"type": "object", "properties": {}},
        ),
        ask_url,
    ),
}


# on_call_tool checks the arguments against the tool's input schema before calling its handler.
on_list_tools, on_call_tool = tool_table_handlers(TOOLS)


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: tools that elicit input from the user mid-call.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
