"""How every meta-tool result is shaped.

Our own tools answer with one JSON object, carried twice: as `structuredContent` and as a text
block (hosts differ in which they show the model). A backend's own result passes through
untouched. Errors are `isError` results with the message and the next thing to do — never a
JSON-RPC error and never a traceback. Everything of ours is redacted on the way out: an expanded
`${VAR}` value reads as `${VAR}`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli.errors import EmceepeeError, JournalError
from emceepee_cli.redact import redact, redact_data
from emceepee_cli.store.faults import serving_from_memory
from emceepee_cli.store.records import Event


@dataclass(frozen=True)
class Reply:
    """Our own answer: the JSON payload, and a sentence for a person or model to read first."""

    payload: dict[str, Any]
    summary: str | None = None


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def as_json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def payload_result(payload: dict[str, Any], summary: str | None = None) -> types.CallToolResult:
    """Our own tool's answer: an optional human sentence, then the JSON."""
    payload, summary = redact_data(payload), summary and redact(summary)
    content: list[types.ContentBlock] = [text(summary)] if summary else []
    content.append(text(as_json(payload)))
    return types.CallToolResult(content=content, structured_content=payload)


def error_result(exc: EmceepeeError) -> types.CallToolResult:
    error: dict[str, Any] = {"type": exc.__class__.__name__, "message": redact(exc.message)}
    if exc.hint:
        error["hint"] = redact(exc.hint)
    return types.CallToolResult(
        content=[text(redact(str(exc)))], structured_content={"error": error}, is_error=True
    )


def journal_block(fault: JournalError) -> dict[str, Any]:
    """The journal's fault as every reply carries it: the file, what is wrong, the command that fixes
    it, and that this session lives in memory only (store/faults.py)."""
    said = serving_from_memory(fault)
    return {"type": type(fault).__name__, "message": redact(said.message), "hint": redact(said.hint or "")}


def envelope_blocks(
    events: Sequence[Event], pending: dict[str, Any], journal_fault: JournalError | None
) -> dict[str, Any]:
    """What a reply appends, in order, one text block per member (empty: nothing to append)."""
    extra: dict[str, Any] = {}
    if journal_fault is not None:
        extra["journal_error"] = journal_block(journal_fault)
    if events:
        extra["events_since_last_response"] = redact_data(events)
    if pending:
        extra["pending_client_action"] = redact_data(pending)
    return extra


def block_texts(extra: dict[str, Any]) -> list[str]:
    """The text of each block a reply appends for `envelope_blocks`' members, in order (the fast
    lane puts them into a backend's bytes as they are, server/fastlane.py)."""
    return [as_json({key: value}) for key, value in extra.items()]


def with_envelope(
    result: types.CallToolResult,
    events: Sequence[Event],
    pending: dict[str, Any],
    own: bool,
    journal_fault: JournalError | None = None,
) -> types.CallToolResult:
    """Append the undelivered events and the pending questions, each only when non-empty, and,
    while `serve` runs from memory because its journal file cannot be used, what is wrong with it.

    Our own results carry them in `structuredContent` too; a backend's result is left as it
    came, so they are added as text blocks only.
    """
    extra = envelope_blocks(events, pending, journal_fault)
    if not extra:
        return result
    blocks = [text(block) for block in block_texts(extra)]
    structured = {**(result.structured_content or {}), **extra} if own else result.structured_content
    return result.model_copy(update={"content": [*result.content, *blocks], "structured_content": structured})
