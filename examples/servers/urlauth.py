"""Example backend "urlauth": tools that need a browser step first (URL elicitation required, -32042).

emceepee's tests spawn it as ``python examples/servers/urlauth.py``. It speaks MCP over stdio
(handshake era, protocol 2025-11-25).

Two pretend third-party services, "files" and "calendar", each need the user to authorize this
server in a browser. Until they have, a tool that uses them fails with the JSON-RPC error
-32042 (URLElicitationRequiredError) whose ``data.elicitations`` lists one URL-mode elicitation
per missing service: {"mode": "url", "elicitationId", "url", "message"}. The id of a service's
elicitation stays the same until it is completed, so a retry reports the same id.

Tools
    list_files(folder="docs")   needs "files"; then "docs: a.txt, b.txt"
    sync_all()                  needs "files" and "calendar" (an error lists those still missing);
                                then "synced files and calendar"
    complete_auth(elicitation_id)
        Stands in for the browser reaching this server's callback URL: marks that elicitation
        completed, sends notifications/elicitation/complete {elicitationId} to the client, and
        returns "authorized <service>". isError for an unknown or already completed id.

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, the server appends:
    required <service> <elicitation_id>      (an error asked for it)
    completed <service> <elicitation_id>

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import UrlElicitationRequiredError
from mcp.server import Server, ServerRequestContext

NAME = "urlauth"
log = logging.getLogger(NAME)

CONNECT_URL = "https://auth.example.com/connect?elicitationId={id}"
SERVICES = {"files": "the example Files service", "calendar": "the example Calendar service"}

# One process serves one stdio connection, so module-level state is per-client state.
authorized: set[str] = set()
pending: dict[str, str] = {}  # service -> the id of its open elicitation


def elicitation_for(service: str) -> types.ElicitRequestURLParams:
    if service not in pending:
        pending[service] = uuid.uuid4().hex
    elicitation_id = pending[service]
    append_event(f"required {service} {elicitation_id}")
    return types.ElicitRequestURLParams(
        message=f"Authorize access to {SERVICES[service]} in your browser.",
        url=CONNECT_URL.format(id=elicitation_id),
        elicitation_id=elicitation_id,
    )


def require(*services: str) -> None:
    missing = [service for service in services if service not in authorized]
    if missing:
        # A JSON-RPC error, not an isError result: the client is to complete these and retry.
        raise UrlElicitationRequiredError(
            [elicitation_for(service) for service in missing],
            "This request requires browser-based authorization.",
        )


async def list_files(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    require("files")
    return text_result(f"{args.get('folder', 'docs')}: a.txt, b.txt")


async def sync_all(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    require("files", "calendar")
    return text_result("synced files and calendar")


async def complete_auth(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    elicitation_id: str = args["elicitation_id"]
    service = next((s for s, open_id in pending.items() if open_id == elicitation_id), None)
    if service is None:
        return text_result(f"no open elicitation {elicitation_id!r}", is_error=True)
    del pending[service]
    authorized.add(service)
    append_event(f"completed {service} {elicitation_id}")
    # On the standalone channel: the request that raised -32042 is long over.
    await ctx.session.send_elicit_complete(elicitation_id)
    return text_result(f"authorized {service}")


TOOLS: ToolTable = {
    "list_files": (
        types.Tool(
            name="list_files",
            description="List the files in a folder of the Files service (needs browser authorization once).",
            input_schema={"type": "object", "properties": {"folder": {"type": "string", "default": "docs"}}},
        ),
        list_files,
    ),
    "sync_all": (
        types.Tool(
            name="sync_all",
            description="Sync the Files and Calendar services (each needs browser authorization once).",
            input_schema={"type": "object", "properties": {}},
        ),
        sync_all,
    ),
    "complete_auth": (
        types.Tool(
            name="complete_auth",
            description="Pretend the user finished the browser step of an elicitation (for tests).",
            input_schema={
                "type": "object",
                "properties": {"elicitation_id": {"type": "string"}},
                "required": ["elicitation_id"],
            },
        ),
        complete_auth,
    ),
}

on_list_tools, on_call_tool = tool_table_handlers(TOOLS)

server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: tools that need a browser authorization step (-32042).",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
