"""Example backend "resumable": operations that finish over several calls, with resume tokens.

emceepee's tests spawn it as ``python examples/servers/resumable.py``; it speaks MCP over stdio.
A result that is not the last one carries a ``nextResumeToken``; the caller repeats the same
tools/call (same tool, same arguments) adding ``resumeToken`` to get the next part. The
operation is complete when a result carries no ``nextResumeToken``.

Tools
    search(query, page_size=3, placement="result")
        Pages through a fixed list of fruit names containing ``query`` (case-insensitive).
        Text: ``page P of N for "<query>": a, b, c``; structured content
        ``{"query", "page", "pages", "total", "items"}``. Every page but the last carries a token.
    job(name, polls=3, placement="result", seconds=0)
        A job that becomes ready on the ``polls``-th resumed call: the first call starts it and
        answers ``job <name>: not ready (poll 0 of N)``; each call with the token answers
        ``not ready (poll K of N)`` with a new token, until poll N answers
        ``job <name>: ready after N polls`` without one. polls=0 is ready at once. Every call
        takes ``seconds`` (a sleep), so a caller can be stopped in the middle of one.
        Structured content ``{"job", "status": "working" | "ready", "poll", "polls"}``.

Where the token travels, chosen per call by ``placement`` (part of the arguments, so it is the
same on every call of one operation):
    "result"      top level of the result, beside ``content``: ``{"content": [...],
                  "nextResumeToken": "..."}``, the proposal's own place. The SDK's server drops
                  unknown result fields, so a middleware puts it there; the SDK's
                  ``ClientSession.call_tool`` drops it too, so read it from the raw result.
    "structured"  ``structuredContent.nextResumeToken``
    "meta"        ``_meta.nextResumeToken``
The token is accepted back from any of: the top level of the tools/call params
(``params.resumeToken``), ``params._meta.resumeToken``, or the arguments
(``arguments.resumeToken``, declared in each tool's input schema). Two different tokens in one
request are refused.

Tokens hold the whole state (base64url JSON, HMAC-signed with a key fixed for every process, or
$EMCEEPEE_EXAMPLE_TOKEN_KEY), so a restarted backend resumes an operation begun by another
process. A token is bound to its tool and arguments and expires after an hour (or
$EMCEEPEE_EXAMPLE_TOKEN_TTL_S seconds); a forged, altered, expired or foreign token is refused
with JSON-RPC error INVALID_PARAMS ("Invalid resumeToken: ...").

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, every call appends
``called <tool> <arguments as JSON> resume=<where>`` (the arguments with their defaults filled in
and without the token; where is params, meta or arguments, joined by "+" when the same token came
in several places, or none), so tests can see where the caller put the token.

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import time
from typing import Any

import anyio
import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

NAME = "resumable"
TOKEN = "resumeToken"
NEXT_TOKEN = "nextResumeToken"
# Where a handler leaves a token the middleware must lift to the top level of the result.
HOIST = "example.emceepee/hoistNextResumeToken"
PLACEMENTS = ("result", "structured", "meta")
DEFAULT_KEY = b"emceepee example resumable key"  # fixed, so every process accepts every token
DEFAULT_TTL_S = 3600

FRUIT = (
    "apple",
    "apricot",
    "avocado",
    "banana",
    "blackberry",
    "blueberry",
    "cherry",
    "grape",
    "grapefruit",
    "lemon",
    "lime",
    "mango",
    "orange",
    "papaya",
    "pear",
    "pineapple",
    "plum",
)


# --------------------------------------------------------------------------- tokens


def _key() -> bytes:
    key = os.environ.get("EMCEEPEE_EXAMPLE_TOKEN_KEY")
    return key.encode() if key else DEFAULT_KEY


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def binding(tool: str, args: dict[str, Any]) -> str:
    """A digest of the call a token belongs to: resuming with other arguments is refused."""
    canonical = json.dumps([tool, args], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def issue(tool: str, args: dict[str, Any], state: dict[str, Any]) -> str:
    ttl = float(os.environ.get("EMCEEPEE_EXAMPLE_TOKEN_TTL_S", DEFAULT_TTL_S))
    claims = {**state, "call": binding(tool, args), "exp": time.time() + ttl}
    body = _b64(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
    return f"{body}.{_b64(hmac.new(_key(), body.encode(), hashlib.sha256).digest())}"


def redeem(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The state a token carries; INVALID_PARAMS if it was not issued for this very call."""
    body, _, mac = token.partition(".")
    expected = _b64(hmac.new(_key(), body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        raise MCPError(types.INVALID_PARAMS, "Invalid resumeToken: not issued by this server, or altered")
    try:
        claims = json.loads(_unb64(body))
    except (binascii.Error, ValueError) as exc:
        raise MCPError(types.INVALID_PARAMS, f"Invalid resumeToken: {exc}") from exc
    if claims.get("call") != binding(tool, args):
        raise MCPError(types.INVALID_PARAMS, f"Invalid resumeToken: it belongs to another {tool} call")
    if claims.get("exp", 0) < time.time():
        raise MCPError(types.INVALID_PARAMS, "Invalid resumeToken: expired")
    return dict(claims)


def incoming_token(ctx: ServerRequestContext, args: dict[str, Any]) -> tuple[str | None, str]:
    """The token the caller sent, and where: params (top level), meta, arguments, or none."""
    raw = ctx.params or {}
    found = {
        where: value
        for where, value in (
            ("params", raw.get(TOKEN)),
            ("meta", (ctx.meta or {}).get(TOKEN)),
            ("arguments", args.get(TOKEN)),
        )
        if value is not None
    }
    if len(set(map(str, found.values()))) > 1:
        raise MCPError(types.INVALID_PARAMS, f"Invalid resumeToken: different tokens in {', '.join(found)}")
    if not found:
        return None, "none"
    value = next(iter(found.values()))
    if not isinstance(value, str):
        raise MCPError(types.INVALID_PARAMS, "Invalid resumeToken: not a string")
    return value, "+".join(found)


def with_token(
    result: types.CallToolResult, token: str | None, placement: str, structured: dict[str, Any]
) -> types.CallToolResult:
    """Put the token (if any) where `placement` says; structured content is always set."""
    if token is not None and placement == "structured":
        structured = {**structured, NEXT_TOKEN: token}
    update: dict[str, Any] = {"structured_content": structured}
    if token is not None and placement == "meta":
        update["meta"] = {NEXT_TOKEN: token}
    elif token is not None and placement == "result":
        update["meta"] = {HOIST: token}
    return result.model_copy(update=update)


async def hoist_token(ctx: ServerRequestContext, call_next: Any) -> Any:
    """Middleware: move a "result"-placed token from `_meta` to the top level of the wire result.

    It runs after the SDK has shaped the result for the wire (which drops fields the spec does
    not define), so the top-level field survives.
    """
    out = await call_next(ctx)
    meta = out.get("_meta") if isinstance(out, dict) else None
    if isinstance(meta, dict) and HOIST in meta:
        meta = dict(meta)
        out = {**out, NEXT_TOKEN: meta.pop(HOIST)}
        if meta:
            out["_meta"] = meta
        else:
            del out["_meta"]
    return out


# --------------------------------------------------------------------------- tools


def begin(
    ctx: ServerRequestContext, tool: str, args: dict[str, Any], defaults: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The arguments that identify the call (defaults filled in, token left out), and its state so far."""
    token, where = incoming_token(ctx, args)
    args = {**defaults, **{k: v for k, v in args.items() if k != TOKEN}}
    append_event(f"called {tool} {json.dumps(args, sort_keys=True)} resume={where}")
    return args, None if token is None else redeem(token, tool, args)


async def search(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    args, state = begin(ctx, "search", args, {"page_size": 3, "placement": "result"})
    query, size = args["query"], args["page_size"]
    matches = [fruit for fruit in FRUIT if query.lower() in fruit]
    offset = int(state["offset"]) if state else 0
    items = matches[offset : offset + size]
    page, pages = offset // size + 1, max(1, -(-len(matches) // size))
    more = offset + size < len(matches)
    token = issue("search", args, {"op": "search", "offset": offset + size}) if more else None
    result = text_result(f'page {page} of {pages} for "{query}": {", ".join(items) or "(nothing)"}')
    structured = {"query": query, "page": page, "pages": pages, "total": len(matches), "items": items}
    return with_token(result, token, args["placement"], structured)


async def job(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    args, state = begin(ctx, "job", args, {"polls": 3, "placement": "result", "seconds": 0})
    name, polls = args["name"], args["polls"]
    await anyio.sleep(args["seconds"])
    poll = int(state["poll"]) if state else 0
    if poll >= polls:
        result = text_result(f"job {name}: ready after {polls} polls")
        return with_token(
            result, None, args["placement"], {"job": name, "status": "ready", "poll": poll, "polls": polls}
        )
    token = issue("job", args, {"op": "job", "poll": poll + 1})
    result = text_result(f"job {name}: not ready (poll {poll} of {polls})")
    structured = {"job": name, "status": "working", "poll": poll, "polls": polls}
    return with_token(result, token, args["placement"], structured)


PLACEMENT = {
    "type": "string",
    "enum": list(PLACEMENTS),
    "default": "result",
    "description": "Where results carry nextResumeToken: the result's top level, structuredContent or _meta.",
}
RESUME_TOKEN = {"type": "string", "description": "A nextResumeToken from the previous call, to continue it."}

TOOLS: ToolTable = {
    "search": (
        types.Tool(
            name="search",
            description="Search fruit names containing `query`, one page per call; resume for the next page.",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "page_size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                    "placement": PLACEMENT,
                    TOKEN: RESUME_TOKEN,
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        ),
        search,
    ),
    "job": (
        types.Tool(
            name="job",
            description="Start a job, then resume to poll it; it is ready on the `polls`-th poll.",
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "polls": {"type": "integer", "minimum": 0, "maximum": 100, "default": 3},
                    "seconds": {"type": "number", "minimum": 0, "maximum": 60, "default": 0},
                    "placement": PLACEMENT,
                    TOKEN: RESUME_TOKEN,
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        ),
        job,
    ),
}

# on_call_tool checks the arguments against the tool's input schema before calling its handler.
on_list_tools, on_call_tool = tool_table_handlers(TOOLS)

server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: paged and polled operations with resume tokens.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)
server.middleware.append(hoist_token)


if __name__ == "__main__":
    serve(server)
