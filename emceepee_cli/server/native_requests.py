"""The host's native MCP requests besides tools: resources, templates, prompts, completion and
the logging level, answered from the lists of session/native_lists.py or passed to the backend
that owns what is asked for.

A request passed through answers with the backend's result as it is, and fails the way the backend
failed: its own JSON-RPC error keeps its code and message (a -32602 stays -32602), and its `data`
names the server (`{"server": name}`, merged into the backend's own `data` when that is an object
without a `server` member, else holding it as `data`). What emceepee itself refuses (an unknown
prompt, an ambiguous URI) is -32602; the rest of what goes wrong on the way (a backend that died,
an answer emceepee cannot use) is -32603, with the message and hint of the meta-tools. A backend
that asks questions while it answers `prompts/get` or `resources/read` gets them asked in input
rounds of a 2026-07-28 host's request (session/native_rounds.py); a refused retry is -32602.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli.backends.failures import BackendAnswered
from emceepee_cli.errors import EmceepeeError, UsageError
from emceepee_cli.server import diagrams
from emceepee_cli.session.native_rounds import HostAsk
from emceepee_cli.session.wiring import Services

T = TypeVar("T")

MESSAGE_MAX_CHARS = 16 * 1024  # a backend's error message past this is cut: hosts show a message whole


async def list_resources(
    ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    diagram = types.Resource(
        uri=diagrams.URI,
        name="diagrams",
        mime_type="application/json",
        description="Mermaid diagrams of emceepee's task, elicitation and sampling states.",
    )
    await ctx.lifespan_context.native.settled()
    return types.ListResourcesResult(resources=[diagram, *ctx.lifespan_context.native.list_resources()])


async def list_resource_templates(
    ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    await ctx.lifespan_context.native.settled()
    return types.ListResourceTemplatesResult(resource_templates=ctx.lifespan_context.native.list_templates())


async def read_resource(
    ctx: ServerRequestContext[Services], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult | types.InputRequiredResult:
    if params.uri != diagrams.URI:
        return await passed(ctx.lifespan_context.native.read_resource(str(params.uri), host_ask(ctx, params)))
    body = json.dumps(diagrams.diagrams(), indent=2)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=diagrams.URI, mime_type="application/json", text=body)]
    )


async def subscribe(
    ctx: ServerRequestContext[Services], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    await passed(ctx.lifespan_context.native.subscribe(str(params.uri)))
    return types.EmptyResult()


async def unsubscribe(
    ctx: ServerRequestContext[Services], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    await passed(ctx.lifespan_context.native.unsubscribe(str(params.uri)))
    return types.EmptyResult()


async def list_prompts(
    ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    await ctx.lifespan_context.native.settled()
    return ctx.lifespan_context.native.list_prompts()


async def get_prompt(
    ctx: ServerRequestContext[Services], params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    native = ctx.lifespan_context.native
    return await passed(native.get_prompt(params.name, params.arguments, host_ask(ctx, params)))


def host_ask(ctx: ServerRequestContext[Services], params: types.InputResponseRequestParams) -> HostAsk | None:
    """What a 2026-07-28 host's request can answer, and a retry's state and answers (the backend's
    questions then come back in input rounds: session/native_rounds.py); None for a handshake-era
    host, which is asked by forwarding (questions/host_link.py)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    caps = ctx.session.client_capabilities or types.ClientCapabilities()
    return HostAsk(caps, params.request_state, params.input_responses)


async def complete(
    ctx: ServerRequestContext[Services], params: types.CompleteRequestParams
) -> types.CompleteResult:
    return await passed(ctx.lifespan_context.native.complete(params))


async def set_level(
    ctx: ServerRequestContext[Services], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    await ctx.lifespan_context.native.set_level(params.level)
    return types.EmptyResult()


async def passed(work: Awaitable[T]) -> T:
    """A request passed to a backend; what goes wrong, as the JSON-RPC error the host gets."""
    try:
        return await work
    except BackendAnswered as exc:
        answer = exc.answer
        message = _bounded(answer.message)
        raise MCPError(code=answer.code, message=message, data=with_server(exc.server, answer.data)) from exc
    except UsageError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=_said(exc)) from exc
    except EmceepeeError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=_said(exc)) from exc


def with_server(server: str, data: Any) -> dict[str, Any]:
    """A backend error's `data` with the server that answered it named in it."""
    if data is None:
        return {"server": server}
    if isinstance(data, dict) and "server" not in data:
        return {**data, "server": server}
    return {"server": server, "data": data}


def _bounded(message: str) -> str:
    if len(message) <= MESSAGE_MAX_CHARS:
        return message
    return f"{message[:MESSAGE_MAX_CHARS]} … ({len(message) - MESSAGE_MAX_CHARS} more characters cut)"


def _said(exc: EmceepeeError) -> str:
    return f"{exc.message} {exc.hint or ''}".strip()
