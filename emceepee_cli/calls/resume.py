"""Resume tokens, both ways: a backend's `nextResumeToken`, and emceepee's own for a task.

From a backend: a result carrying `nextResumeToken` (at its top level, where the proposal puts
it, or in `structuredContent` or `_meta`) is one part of an operation; the same call re-issued
with `resumeToken` gives the next part, until a result carries none. The SDK's `call_tool`
drops unknown top-level result fields, so `call_tool_raw` sends the request itself and reads
the raw result. A token is sent back in every place a backend may look for it: the top level of
the params, `_meta.resumeToken`, and the arguments when the tool's schema declares it.

Toward the host: a promoted call's task carries `emp1.<claims>.<mac>`, signed with the install
key (seal.py), naming the task and the call it belongs to and expiring with the task;
`execute_tool` with it waits for that task instead of calling anything. The prefix tells ours
from a backend's without trying a MAC on foreign strings; one that fails the check is refused,
never forwarded.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar, Literal

import mcp_types as types
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from pydantic import ConfigDict, TypeAdapter

from emceepee_cli.errors import UsageError
from emceepee_cli.seal import RESUME_PREFIX, call_digest, unseal

log = logging.getLogger(__name__)

PREFIX = RESUME_PREFIX
TOKEN, NEXT_TOKEN = "resumeToken", "nextResumeToken"
MAX_TOKEN_CHARS = 8192  # a longer "token" is untrusted junk, not something to send back


class RawResult(types.Result):
    """Any result, keeping the fields no result type defines (the top-level nextResumeToken)."""

    model_config = ConfigDict(extra="allow")


_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)


class RawToolsCall(types.Request[dict[str, Any], Literal["tools/call"]]):
    """tools/call with params as a plain dict, so a top-level `resumeToken` reaches the wire."""

    method: Literal["tools/call"] = "tools/call"
    params: dict[str, Any]
    name_param: ClassVar[str | None] = "name"


def backend_token(raw: dict[str, Any]) -> str | None:
    """The `nextResumeToken` a raw tools/call result carries (top level, structuredContent, _meta)."""
    found: list[str] = []
    for holder in (raw, raw.get("structuredContent"), raw.get("_meta")):
        value = holder.get(NEXT_TOKEN) if isinstance(holder, dict) else None
        if value is None:
            continue
        if not isinstance(value, str) or not value or len(value) > MAX_TOKEN_CHARS:
            log.warning("ignored a nextResumeToken that is not a short string (%.40r)", value)
            continue
        found.append(value)
    if len(set(found)) > 1:
        log.warning("a result carries different nextResumeTokens; using the top-level one")
    return found[0] if found else None


def declares_token(tool: types.Tool | None) -> bool:
    """The tool takes the token as an argument too (its input schema declares `resumeToken`)."""
    properties = (tool.input_schema or {}).get("properties") if tool is not None else None
    return isinstance(properties, dict) and TOKEN in properties


async def call_tool_raw(
    session: ClientSession,
    tool: str,
    args: dict[str, Any] | None,
    *,
    token: str | None = None,
    in_arguments: bool = False,
    responses: types.InputResponses | None = None,
    state: str | None = None,
    progress: ProgressFnT | None = None,
) -> tuple[types.CallToolResult | types.InputRequiredResult, str | None]:
    """One tools/call, read raw: its result, and the resume token it carries (if any)."""
    arguments = dict(args or {})
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if token is not None:
        params[TOKEN] = token
        params["_meta"] = {TOKEN: token}
        if in_arguments:
            arguments[TOKEN] = token
    if responses is not None:
        params["inputResponses"] = {
            key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, value in responses.items()
        }
    if state is not None:
        params["requestState"] = state
    reply = await session.send_request(RawToolsCall(params=params), RawResult, progress_callback=progress)
    result, found = read_result(reply)
    if isinstance(result, types.CallToolResult) and not result.is_error:
        await session.validate_tool_result(tool, result)
    return result, found


def read_result(reply: RawResult) -> tuple[types.CallToolResult | types.InputRequiredResult, str | None]:
    """A raw tools/call result as a model, and the resume token it carries (if any)."""
    raw = reply.model_dump(by_alias=True, mode="json", exclude_none=True)
    result = _RESULT.validate_python(raw)
    if isinstance(result, types.InputRequiredResult):
        return result, None
    return result, backend_token(raw)


# ---- emceepee's own tokens ---------------------------------------------------------------------


def ours(token: str) -> bool:
    return token.startswith(PREFIX)


def verify(key: bytes, token: str) -> dict[str, Any]:
    """An emceepee resume token's claims; a UsageError if forged, altered, foreign or expired."""
    claims = unseal(key, token.strip(), PREFIX)
    if claims is None or claims.get("p") != "resume":
        raise UsageError(
            "This resume_token looks like emceepee's own, but this emceepee did not issue it, "
            "or it was altered.",
            hint="Use the resume_token exactly as returned; a token from another install or computer "
            "does not work here. list_tasks(include_completed=true) shows the tasks this one knows.",
        )
    if claims["exp"] < time.time():
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["exp"]))
        raise UsageError(
            f"This resume_token (task {claims['t']}) expired at {at}.",
            hint="Its task is gone; list_tasks(include_completed=true) shows the tasks still kept.",
        )
    return claims


def check_call(claims: dict[str, Any], server: str, tool: str, args: dict[str, Any] | None) -> None:
    if claims["c"] != call_digest(server, tool, args):
        raise UsageError(
            f"This resume_token belongs to task {claims['t']}, not to {server}.{tool} with these arguments.",
            hint="Send it with the same server, tool and args as the call that returned it, "
            f"or use get_task_result('{claims['t']}').",
        )
