"""Where a chain ends short (calls/chain.py): why it stops before the call a result suggests
(`Stop`, one of `STOPS`), and the result of a call that was not made because its approval was
declined or expired (`not_called`).

Neither is an error: the host gets the last result, or the not-called result, with the reason
and, where it helps, the `execute_tool` call to make it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli.calls.suggestion import compact
from emceepee_cli.store.records import PendingRow

# Why a chain stops before the call a result suggests (in the order they are checked; the doc of
# calls/chain.py explains each); the diagrams resource draws the loop from it.
STOPS: dict[str, str] = {
    "not_followed": "follow_next_tool is off",
    "malformed_suggestion": "the suggestion is malformed or huge",
    "denied": "tools.allow / tools.deny",
    "unknown_tool": "the backend does not list it",
    "invalid_arguments": "its input schema refuses them",
    "cycle": "the same call was made in this chain",
    "depth_limit": "max_chain_depth calls were made",
    "approval_declined": "its approval was declined",
    "approval_expired": "its approval expired",
    "resumable_step": "a result's resume token is not resumed",
}


@dataclass
class Stop:
    """Why a chain stopped: the reason (one of `STOPS`), a message for the host, the suggested
    call as shown, and whether to tell the host how to make it (`how`)."""

    reason: str  # one of STOPS
    message: str
    suggested: dict[str, Any] | None = None
    how: bool = True

    def __post_init__(self) -> None:
        if self.reason not in STOPS:
            raise ValueError(f"{self.reason!r} is not a reason a chain stops for (see STOPS)")


def not_called(server: str, tool: str, args: dict[str, Any] | None, row: PendingRow) -> types.CallToolResult:
    """A call whose approval was declined (or expired): a clear result, not a backend error."""
    who = f" (by {row['answered_by']})" if row.get("answered_by") else ""
    summary = f"{server}.{tool} was not called: its approval was {row['status']}{who}."
    payload = {
        "approval": {
            "request_id": row["request_id"],
            "status": row["status"],
            **({"answered_by": row["answered_by"]} if row.get("answered_by") else {}),
            "tool": tool,
            "arguments": args or {},
        },
        "called": False,
    }
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=summary),
        types.TextContent(type="text", text=compact(payload)),
    ]
    return types.CallToolResult(content=content, structured_content=payload)
