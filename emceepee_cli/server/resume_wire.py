"""Resume tokens where the resume-token proposal puts them on the wire, for a client that knows it.

Out: a tools/call result that shows a working task (`proxy_task` or `task`, with its
`resume_token`) also carries that token as the result's top-level `nextResumeToken`. The SDK's
server drops fields a result type does not define, so this is done after the handler, on the
wire dict. In: an `execute_tool` call whose params carry `resumeToken` (top level, or in
`_meta`) gets it as its `resume_token` argument; two different tokens are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

TOKEN, NEXT_TOKEN = "resumeToken", "nextResumeToken"


async def resume_tokens(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
        return await call_next(ctx)
    out = await call_next(_token_as_argument(ctx))
    return with_next_token(out) if isinstance(out, dict) else out


def with_next_token(result: dict[str, Any]) -> dict[str, Any]:
    """A wire-form tools/call result, with the token of the working task it shows at its top level."""
    token = working_token(result.get("structuredContent"))
    return result if token is None else {**result, NEXT_TOKEN: token}


def working_token(structured: Any) -> str | None:
    """The resume token of the working task a result shows (None: it shows none)."""
    if not isinstance(structured, dict):
        return None
    for key in ("proxy_task", "task"):
        task = structured.get(key)
        if (
            isinstance(task, dict)
            and task.get("status") == "working"
            and isinstance(task.get("resume_token"), str)
        ):
            return str(task["resume_token"])
    return None


def _token_as_argument(ctx: ServerRequestContext[Any, Any]) -> ServerRequestContext[Any, Any]:
    params: dict[str, Any] = dict(ctx.params or {})
    meta = params.get("_meta")
    found = [params.pop(TOKEN, None), meta.get(TOKEN) if isinstance(meta, dict) else None]
    if params.get("name") != "execute_tool" or not any(found):
        return ctx
    arguments = dict(params.get("arguments") or {})
    found.append(arguments.get("resume_token"))
    given = [t for t in found if t]
    if not all(isinstance(t, str) for t in given) or len(set(given)) > 1:
        raise MCPError(types.INVALID_PARAMS, "Different resume tokens in one request; send one.")
    arguments["resume_token"] = given[0]
    params["arguments"] = arguments
    return dataclasses.replace(ctx, params=params)
