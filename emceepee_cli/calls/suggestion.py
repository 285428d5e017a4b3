"""The next tool a result suggests (`_meta.nextTool`, tool-chaining metadata): where a result
carries it, the shape it must have, and how it is shown to the host.

Whether a suggestion is followed is the chain's to decide (calls/chain.py); this module only reads
it and writes it out: the suggestion as the host sees it in a `tool_chain` block (cut when huge),
and the `execute_tool` call that makes it (or resumes a step).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import mcp_types as types

from emceepee_cli.calls.resume import NEXT_TOKEN

SUGGESTION_KEYS = ("nextTool", "openai/nextTool")
MAX_SUGGESTION_CHARS = 65_536  # a suggestion bigger than this is not followed, nor repeated whole
SHOWN_ARGS_CHARS = 2000
BRIEF_CHARS = 200


def suggests_more(result: dict[str, Any]) -> bool:
    """A wire-form tools/call result that asks for more than being passed on: a next tool, or a
    resume token (so it must take the slow path through the chain)."""
    meta = result.get("_meta")
    structured = result.get("structuredContent")
    if isinstance(meta, dict) and (any(key in meta for key in SUGGESTION_KEYS) or NEXT_TOKEN in meta):
        return True
    return NEXT_TOKEN in result or (isinstance(structured, dict) and NEXT_TOKEN in structured)


def suggestion_of(result: types.CallToolResult) -> tuple[str, Any] | None:
    """The `_meta` key a result suggests a next tool under, and what it holds; None: no suggestion."""
    meta = result.meta or {}
    for key in SUGGESTION_KEYS:
        if key in meta:
            return key, meta[key]
    return None


def shape(value: Any) -> tuple[str | None, dict[str, Any]]:
    """A suggestion's tool and arguments; (None, {}) when it is not {tool, arguments?}."""
    if not isinstance(value, dict) or len(compact(value)) > MAX_SUGGESTION_CHARS:
        return None, {}
    tool, args = value.get("tool"), value.get("arguments", {})
    if not isinstance(tool, str) or not tool or not isinstance(args, dict):
        return None, {}
    return tool, copy.deepcopy(args)


def shown(suggestion: dict[str, Any]) -> dict[str, Any]:
    """The suggestion as the host sees it: whole, or its first characters when it is long."""
    text = compact(suggestion)
    return suggestion if len(text) <= SHOWN_ARGS_CHARS else {"truncated": text[:SHOWN_ARGS_CHARS]}


def brief(value: Any) -> str:
    """A malformed suggestion, quoted in the stop that says so: its first characters."""
    text = compact(value)
    return text if len(text) <= BRIEF_CHARS else f"{text[:BRIEF_CHARS]}… ({len(text)} characters)"


def canonical(args: dict[str, Any] | None) -> str:
    """One text for equal arguments, whatever their keys' order: what tells a cycle."""
    return json.dumps(args or {}, sort_keys=True, separators=(",", ":"))


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def how(server: str, tool: str, args: Any, token: str | None = None) -> str:
    """The `execute_tool` call that makes a suggested call, or resumes a step with `token`."""
    call = f"execute_tool(server={server!r}, tool={tool!r}, args={compact(args or {})}"
    return call + (f", resume_token={token!r})" if token else ")")
