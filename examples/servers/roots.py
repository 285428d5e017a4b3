"""Example backend "roots": a handshake-era server that asks the client for its roots.

emceepee's tests spawn it as ``python examples/servers/roots.py``. It speaks MCP over stdio.

Tools
    list_roots()
        Sends roots/list to the client now and returns what came back: one text line per
        root ("<uri> <name>") and structured content {"roots": [{"uri", "name"?}, ...]}.
        isError when the client did not declare the ``roots`` capability or the request fails.
    known_roots()
        Listed only when the client declared ``roots``. The roots this server keeps: fetched
        once the client is initialized and again after every notifications/roots/list_changed
        (a fetch in progress is waited for). Structured {"roots": [...], "changes": <number of
        list_changed notifications received>}.

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, the server appends:
    roots changed                        (a notifications/roots/list_changed arrived)
    roots <uri> <uri> ...                (a fetch finished; "roots" alone for an empty list)
    roots error <message>                (a fetch failed)

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from _example import append_event, serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning

NAME = "roots"
log = logging.getLogger(NAME)

# Roots are deprecated as of protocol 2026-07-28 but are exactly what a handshake-era
# backend uses; the warnings would only add noise to stderr.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LIST_ROOTS = types.Tool(
    name="list_roots",
    description="Ask the client for its roots now (roots/list) and return them.",
    input_schema={"type": "object", "properties": {}},
    annotations=types.ToolAnnotations(read_only_hint=True),
)
KNOWN_ROOTS = types.Tool(
    name="known_roots",
    description="The client's roots as this server last fetched them, and how often they changed.",
    input_schema={"type": "object", "properties": {}},
    annotations=types.ToolAnnotations(read_only_hint=True),
)


class Roots:
    """What this connection's server knows of the client's roots."""

    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self.group = group
        self.roots: list[dict[str, Any]] = []
        self.changes = 0
        self.synced = anyio.Event()
        self.synced.set()  # nothing to wait for until a fetch starts

    def refresh(self, session: ServerSession) -> None:
        """Fetch the roots in the background; known_roots waits for the latest fetch."""
        synced = self.synced = anyio.Event()
        self.group.start_soon(self._fetch, session, synced)

    async def _fetch(self, session: ServerSession, synced: anyio.Event) -> None:
        try:
            # No related request: this runs after the request (or notification) that started
            # it, so it goes out on the connection's standalone channel.
            self.roots = await fetch(session)
            append_event(" ".join(["roots", *(root["uri"] for root in self.roots)]))
        except MCPError as exc:
            log.warning("roots/list failed: %s", exc.message)
            append_event(f"roots error {exc.message}")
        finally:
            synced.set()


def declared_roots(session: ServerSession) -> bool:
    caps = session.client_capabilities
    return bool(caps and caps.roots is not None)


async def fetch(session: ServerSession) -> list[dict[str, Any]]:
    listed = await session.send_request(types.ListRootsRequest(), types.ListRootsResult)
    return [root.model_dump(by_alias=True, mode="json", exclude_none=True) for root in listed.roots]


def roots_result(roots: list[dict[str, Any]], **extra: Any) -> types.CallToolResult:
    lines = [f"{root['uri']} {root.get('name', '')}".rstrip() for root in roots] or ["(no roots)"]
    return text_result("\n".join(lines), structured={"roots": roots, **extra})


@asynccontextmanager
async def lifespan(server: Server[Roots]) -> AsyncIterator[Roots]:
    async with anyio.create_task_group() as group:
        yield Roots(group)
        group.cancel_scope.cancel()


async def on_initialized(ctx: ServerRequestContext[Roots], params: types.NotificationParams) -> None:
    if declared_roots(ctx.session):
        ctx.lifespan_context.refresh(ctx.session)


async def on_roots_list_changed(
    ctx: ServerRequestContext[Roots], params: types.NotificationParams | None
) -> None:
    append_event("roots changed")
    state = ctx.lifespan_context
    state.changes += 1
    state.refresh(ctx.session)


async def on_list_tools(
    ctx: ServerRequestContext[Roots], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    # Like servers that need roots to work, hide the tool that depends on them from a client without them.
    tools = [LIST_ROOTS, KNOWN_ROOTS] if declared_roots(ctx.session) else [LIST_ROOTS]
    return types.ListToolsResult(tools=tools)


async def on_call_tool(
    ctx: ServerRequestContext[Roots], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name == LIST_ROOTS.name:
        if not declared_roots(ctx.session):
            return text_result("the client did not declare the roots capability", is_error=True)
        try:
            return roots_result(await fetch(ctx.session))
        except MCPError as exc:
            return text_result(f"roots/list failed: {exc.message}", is_error=True)
    if params.name == KNOWN_ROOTS.name and declared_roots(ctx.session):
        state = ctx.lifespan_context
        await state.synced.wait()
        return roots_result(state.roots, changes=state.changes)
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")


server: Server[Roots] = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: tools that read the client's roots.",
    lifespan=lifespan,
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    on_roots_list_changed=on_roots_list_changed,
)
server.add_notification_handler("notifications/initialized", types.NotificationParams, on_initialized)


if __name__ == "__main__":
    serve(server)
