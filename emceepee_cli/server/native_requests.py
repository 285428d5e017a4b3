"""The host's native MCP requests besides tools: resources, templates, prompts, completion and
the logging level, answered from the lists of session/native_lists.py or passed to the backend
that owns what is asked for (what goes wrong on the way, as a JSON-RPC error the host shows).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TypeVar

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext

from emceepee_cli.errors import EmceepeeError, NotFound
from emceepee_cli.server import diagrams
from emceepee_cli.session.wiring import Services

T = TypeVar("T")


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
) -> types.ReadResourceResult:
    if params.uri != diagrams.URI:
        return await passed(ctx.lifespan_context.native.read_resource(str(params.uri)))
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
) -> types.GetPromptResult:
    return await passed(ctx.lifespan_context.native.get_prompt(params.name, params.arguments))


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
    """A native request routed to a backend; what goes wrong, as a JSON-RPC error the host shows."""
    try:
        return await work
    except NotFound as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=f"{exc.message} {exc.hint or ''}".strip()) from exc
    except EmceepeeError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{exc.message} {exc.hint or ''}".strip()) from exc
