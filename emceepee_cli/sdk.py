"""The MCP SDK's internals emceepee uses, in this one module: each is named here with why, and no
other module imports one (tests/test_sdk.py holds every module to that).

pyproject.toml pins `mcp` and `mcp-types` to the 2.3 minor version (`>=2.3,<2.4`), which these
were read from and are tested against. They are not the SDK's public surface, so any release may
move them: raise the pin only once this list is checked against the new version. The tests named
with each fail when one moves.

- `mcp.client._probe.negotiate_auto`: the era probe of a backend configured with
  `protocol = "auto"` (backends/connect.py). The SDK's `Client(mode="auto")` runs it, but emceepee
  drives a `ClientSession` of its own (its dispatcher, its callbacks), which has no public way to
  it. Held by tests/test_sdk.py.
- `mcp.client.session._clamp_inbound_ttl` and `_later_revision_fields`: how
  `ClientSession.send_request` reads a result before parsing it (`read_as_session`), so a fast
  call's raw result (calls/raw_step.py) fails with the very errors of the slow path. Held by
  tests/test_sdk.py, against the session's own reading.
- `ClientSession._tool_output_schemas`: the tools whose results the session checks against an
  output schema (`checks_output`), so a fast call's plain result is parsed into a model only when
  the session would check it (calls/raw_step.py). Held by tests/test_sdk.py.
- `JSONRPCDispatcher._resolve_pending`, and the `_related_request_id` keyword of its
  `send_raw_request`: where a peer's answer is handed to the request waiting for it, which
  backends/dispatcher.py overrides to tell a backend's error answer from the connection ending.
  The dispatcher is imported from here for that reason. Held by tests/core/test_dispatcher.py.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mcp import ClientSession
from mcp.client._probe import negotiate_auto
from mcp.client.session import (
    _clamp_inbound_ttl,  # pyright: ignore[reportPrivateUsage]
    _later_revision_fields,  # pyright: ignore[reportPrivateUsage]
)
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import methods

__all__ = ["JSONRPCDispatcher", "checks_output", "negotiate_auto", "read_as_session"]


def read_as_session(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    """A result as `ClientSession.send_request` reads it before parsing it: a negative `ttlMs`
    floored, checked against the negotiated revision `version` (pydantic's ValidationError), a
    later revision's fields dropped. `result` itself is left as it is."""
    raw = dict(result)
    _clamp_inbound_ttl(raw)
    with contextlib.suppress(KeyError):  # a revision that does not list the method: not checked
        methods.validate_server_result(method, version, raw)
    foreign = _later_revision_fields(method, version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return raw


def checks_output(session: ClientSession, tool: str) -> bool:
    """Whether `tool`'s results go to `session.validate_tool_result`: the session holds an output
    schema for it, or has not listed it (then it lists the tools again first, as on the slow path)."""
    schemas = session._tool_output_schemas  # pyright: ignore[reportPrivateUsage]
    return tool not in schemas or schemas[tool] is not None
