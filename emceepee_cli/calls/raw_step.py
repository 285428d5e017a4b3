"""One request of a step, sent raw: the fast lane's backend side, without SDK models on the way.

A call that came by the fast lane (`Call.fast`) runs in `Tasks` exactly as any other: the same
chain, policy, approvals, promotion, questions, progress, cancellation, TTL and journaling. Only
its first request differs, when the backend allows it (a ready stdio backend spoken to in the
handshake era, a listed tool without task execution): `Stepper` writes the `tools/call` line
itself through `backends/raw_pipe.py` and gets the answer's bytes back. A tool's output schema is
still checked by the session (`validate_tool_result`), so its errors read as on the slow path.

What comes back is then kept one of two ways:
- `ReturnedRaw` (the call's end): for a result of the plain shape (text blocks, `isError`, object
  `structuredContent` and `_meta`) that suggests nothing more, the bytes the slow path would
  write for it — the backend's own when they already are exactly those (an SDK backend's), else
  the same members re-serialized in the slow path's order and manner. The chain gets a stand-in
  result with no content: nothing follows from it. A call promoted to a task keeps them too: they
  are journaled as they are (store/tables/results.py) and read back from there for the host.
- else the result as the slow path reads it, for the chain to follow, resume or journal.
A JSON-RPC error, a malformed answer, a dying backend or a broken pipe fail through
`Backend.request` (the caller's), so their errors read exactly as on the slow path.

The plain shape's bytes are made in emceepee_cli/jsonrpc.py (`canonical`), with the rest of what
the host gets in the SDK's bytes; how the session reads a result is the SDK's own code, reached
through emceepee_cli/sdk.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import ClientSession

from emceepee_cli import sdk
from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.backends.failures import Answered
from emceepee_cli.backends.raw_pipe import Answer, Exchanges, loads
from emceepee_cli.calls import resume, spool
from emceepee_cli.calls.call import Call
from emceepee_cli.calls.chain import TEXT_CHARS
from emceepee_cli.calls.end import ReturnedRaw
from emceepee_cli.calls.suggestion import suggests_more
from emceepee_cli.jsonrpc import canonical

LEGACY = "2025-11-25"  # the session's own fallback when no version was negotiated
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
Sent = tuple[types.CallToolResult | types.InputRequiredResult, str | None]


def exchanges_for(backend: Backend, tool: str) -> Exchanges | None:
    """The raw channel to call `tool` on, if nothing the slow path does on the way is needed: a
    ready stdio backend in the handshake era, a listed tool without task execution."""
    process = backend.process
    if backend.status != Status.READY or process is None or backend.spec.protocol != "legacy":
        return None
    exchanges = process.exchanges
    if exchanges is None or exchanges.closed:
        return None
    listed = backend.offer.tools.get(tool)
    if listed is None or getattr(listed, "execution", None) is not None:
        return None
    return exchanges


async def send(
    call: Call, exchanges: Exchanges, session: ClientSession, tool: str, args: Any, progress: ProgressFn
) -> Sent:
    """One raw `tools/call`; its result as `Stepper._send` returns one (see the module's doc). A
    tool's output schema is checked by the session's own `validate_tool_result`, as on the slow
    path, so a result that fails it fails the call with the same error."""
    result = read(await exchanges.call(tool, args, progress))  # the answer's line is dropped here
    if not isinstance(result, dict):
        raise TypeError("the answer's result is not a JSON object")
    raw = canonical(result, None) if not suggests_more(result) else None
    if raw is not None:
        shown = preview(result)
        is_error = result.get("isError", False)
        if not is_error and sdk.checks_output(session, tool):
            await session.validate_tool_result(
                tool, types.CallToolResult.model_validate(result, by_name=False)
            )
        del result  # its text, as big as the bytes, is not needed past here
        call.conclude(ReturnedRaw(await spool.BUDGET.hold(raw), shown))  # the call's end: nothing follows
        return types.CallToolResult.model_construct(content=[], is_error=is_error), None
    read_back, token = resume.read_result(as_session_reads(result, session.protocol_version or LEGACY))
    if isinstance(read_back, types.CallToolResult) and not read_back.is_error:
        await session.validate_tool_result(tool, read_back)
    return read_back, token


def preview(result: dict[str, Any]) -> str:
    """A plain result's first text, cut short, as its step shows it (`Step.text`)."""
    blocks = result.get("content") or [{}]
    return str(blocks[0].get("text", ""))[:TEXT_CHARS]


def as_session_reads(result: dict[str, Any], version: str) -> resume.RawResult:
    """The result as `ClientSession.send_request` reads one (mcp/client/session.py), so its errors
    read the same: checked against the negotiated revision, a later revision's fields dropped."""
    return resume.RawResult.model_validate(sdk.read_as_session("tools/call", version, result), by_name=False)


def read(answer: Answer) -> Any:
    """The answer's result, parsed from its line whole (cutting the result's bytes out first would
    cost one more copy of a big result, and they are serialized again anyway, see `canonical`).

    A JSON-RPC error raises `Answered`, as the session's dispatcher would (backends/dispatcher.py); a
    line that is not one answer raises ValueError (the slow path's "an answer emceepee cannot use").
    """
    doc = answer.doc if answer.doc is not None else loads(answer.line)
    if not isinstance(doc, dict):
        raise TypeError("the answer is not a JSON object")
    if isinstance(doc.get("error"), dict):
        error = types.ErrorData.model_validate(doc["error"], by_name=False)
        raise Answered(code=error.code, message=error.message, data=error.data)
    if "result" not in doc:
        raise ValueError("the answer has neither a result nor an error")
    return doc["result"]
