"""The SDK's JSON-RPC dispatcher for one backend connection, telling apart where an error came from.

The SDK wakes a request's waiter with `MCPError(-32000 "Connection closed")` when the connection
ends, and with the same kind of `MCPError` when the backend answers that request with an error —
and -32000 is the commonest code a server answers with. Taken for a closed connection, a
backend's -32000 would fail every call in flight on it and restart it. So each error that
resolves a request (the backend's answer to that id, over stdio or HTTP) is raised as
`failures.Answered`; the connection ending stays a plain `MCPError`. An error whose `data` is an
exception was made by emceepee itself at the pipe (backends/transport.py: an answer over the line
limit, refused unread): that exception is raised instead. So is the `Unauthorized` of a request
a remote backend refused with HTTP 401 or 403 (`refusals`, backends/authorization.py), in place of
the SDK's "Server returned an error response".

Adapts the SDK's internals, pinned to mcp 2.3 and imported through emceepee_cli/sdk.py:
`_resolve_pending` is where an answer is handed to its waiter (tests/core/test_dispatcher.py holds
it to that).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.shared.dispatcher import CallOptions

from emceepee_cli.backends.authorization import Refusals
from emceepee_cli.backends.failures import Answered
from emceepee_cli.sdk import JSONRPCDispatcher


class BackendDispatcher(JSONRPCDispatcher):
    refusals: Refusals | None = None  # a remote backend's: the requests its server refused

    def _resolve_pending(
        self, request_id: types.RequestId | None, outcome: dict[str, Any] | types.ErrorData
    ) -> None:
        refused = self.refusals.take(request_id) if self.refusals is not None else None
        if isinstance(outcome, types.ErrorData) and refused is not None:
            outcome = types.ErrorData(code=outcome.code, message=refused.message, data=refused)
        elif isinstance(outcome, types.ErrorData) and not isinstance(outcome.data, BaseException):
            answered = Answered(outcome.code, outcome.message, outcome.data)
            outcome = types.ErrorData(code=outcome.code, message=outcome.message, data=answered)
        super()._resolve_pending(request_id, outcome)

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
        *,
        _related_request_id: types.RequestId | None = None,
    ) -> dict[str, Any]:
        try:
            return await super().send_raw_request(
                method, params, opts, _related_request_id=_related_request_id
            )
        except MCPError as exc:
            if isinstance(exc.data, BaseException):  # an answer's error, or emceepee's refusal of it
                raise exc.data from None
            raise
