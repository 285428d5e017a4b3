"""How every meta-tool result is shaped.

Our own tools answer with one JSON object, carried twice: as `structuredContent` and as a text
block (hosts differ in which they show the model). A backend's own result passes through
untouched. Errors are `isError` results with the message and the next thing to do — never a
JSON-RPC error and never a traceback.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from emceepee_cli.errors import EmceepeeError


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def as_json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def payload_result(payload: dict[str, Any], summary: str | None = None) -> types.CallToolResult:
    """Our own tool's answer: an optional human sentence, then the JSON."""
    content: list[types.ContentBlock] = [text(summary)] if summary else []
    content.append(text(as_json(payload)))
    return types.CallToolResult(content=content, structured_content=payload)


def error_result(exc: EmceepeeError) -> types.CallToolResult:
    error: dict[str, Any] = {"type": exc.__class__.__name__, "message": exc.message}
    if exc.hint:
        error["hint"] = exc.hint
    return types.CallToolResult(content=[text(str(exc))], structured_content={"error": error}, is_error=True)
