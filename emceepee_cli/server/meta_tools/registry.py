"""The meta-tools' registry: what a meta-tool is, and the decorator that lists one.

Each group module (`servers`, `tasks`, `resources`, `questions`, `heard`) lists its tools in its
own `Group`. A handler takes the validated arguments, calls one
method of the services and returns either a JSON payload (our own answer) or a `CallToolResult`
(a backend's answer, passed through; as `Passed` bytes when it came by the fast lane), or for a
2026-07-28 host an `InputRound` of the call's questions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli.calls.call import InputRound, Passed, Relay
from emceepee_cli.calls.host_rounds import HostRetry
from emceepee_cli.server.envelope import Reply
from emceepee_cli.session.wiring import Services

Payload = dict[str, Any] | Reply | types.CallToolResult | Passed | InputRound


@dataclass(frozen=True)
class Call:
    """What a handler may use of the upstream request besides its arguments."""

    relay: Relay | None = None  # set when the host asked for progress (sent a progressToken)
    fast: bool = False  # it came by the fast lane (server/fastlane.py): a backend may be called raw
    # A 2026-07-28 host's request: what it declared it can answer (its call's questions then come
    # back as input rounds), and, on a retry, the round's state and answers (calls/host_rounds.py).
    asks: types.ClientCapabilities | None = None
    retry: HostRetry | None = None


Handler = Callable[[Services, dict[str, Any], Call], Awaitable[Payload]]


@dataclass(frozen=True)
class MetaTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool

    def as_tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=self.read_only),
        )


STR = {"type": "string"}
SERVER = {"type": "string", "description": "A server name, as shown by list_servers."}
SERVER_FILTER = {"type": "string", "description": "Only this server (default: all servers)."}
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


class Group:
    """The meta-tools of one module, in the order they are defined."""

    def __init__(self) -> None:
        self.tools: dict[str, MetaTool] = {}

    def __repr__(self) -> str:
        return f"<Group {list(self.tools)}>"

    def tool(
        self,
        name: str,
        description: str,
        properties: dict[str, Any],
        required: tuple[str, ...] = (),
        *,
        read_only: bool = True,
    ) -> Callable[[Handler], Handler]:
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = list(required)

        def register(handler: Handler) -> Handler:
            self.tools[name] = MetaTool(name, description, schema, handler, read_only)
            return handler

        return register
