"""The host's side of `serve`: its session, what it can answer, and asking it a backend's question.

The session is kept from the host's `notifications/initialized` (or, for a host that never sends
it, its first request). A request the host sent ends with its handler, and with it that request's
own channel; a question is therefore sent on the connection's standalone channel, which a
handshake-era connection over stdio keeps open for the whole session, whatever request is (or is
not) open. A 2026-07-28 host takes no requests from a server at all; each of its requests brings
its own capabilities, so the latest one is kept, and a call's own questions go back to it as input
rounds of that call (calls/host_rounds.py), each request deciding by what it declared (`undeclared`).

An answer of the host's that the wire cannot use (it holds a lone surrogate, nests too deep, or
is not a valid response, but its id can be read) reaches the waiting request as `refused_answer`
makes it: that request's failure at once, marked as emceepee's. A forwarded question then raises
`UsageError`, as it does for an answer the wire read that is not the result asked for (the
question is parked and the model told why, questions/questions.py); roots/list falls back as any
failure does (session/roots.py).

Whether a question goes to the host: never under the `park` policy; under `forward` whenever the
host can take requests; under `auto` only when it also declared it can answer that kind. When
a question is not forwarded, `why_not` says why (it is logged).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pydantic
from mcp import MCPError
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli.config import Policy
from emceepee_cli.errors import UsageError
from emceepee_cli.store.records import Kind

REFUSED_BY = {"refused_by": "emceepee"}  # the data of the error an unusable answer becomes


class HostLink:
    def __init__(self) -> None:
        self.session: ServerSession | None = None
        self.named = False

    def __repr__(self) -> str:
        return f"<HostLink {'connected' if self.session else 'not yet seen'}>"

    def note(self, session: ServerSession) -> types.Implementation | None:
        """Keep a session of the host's connection; who the host is, the first time it is known.

        A handshake-era connection has one session, kept once. A 2026-07-28 host makes a session
        of each request, with that request's capabilities: the latest is kept, never a stale first."""
        if self.session is None or session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self.session = session
        if self.named or session.client_params is None:
            return None
        self.named = True
        return session.client_params.client_info

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        return self.session.client_capabilities if self.session is not None else None

    def can_send(self) -> bool:
        """The host's connection takes requests from us now (any era but 2026-07-28)."""
        return self.session is not None and self.session.protocol_version not in MODERN_PROTOCOL_VERSIONS

    def why_not(self, policy: Policy, kind: str, params: dict[str, Any]) -> str | None:
        """Why a `kind` question cannot be forwarded under `policy`; None when it can."""
        if policy == "park":
            return f"the {kind} policy is 'park'"
        if self.session is None:
            return "no host has connected yet"
        if not self.can_send():
            return (
                f"the host speaks MCP {self.session.protocol_version}, which takes no requests from a server "
                "(a call's own question goes back in that call's reply when its request can answer it)"
            )
        if policy == "forward":
            return None
        return undeclared(self.capabilities, kind, params)

    async def forward(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """Ask the host; its answer as our snake_case JSON (not yet checked against the question).
        UsageError: the host answered with what the wire could not use."""
        assert self.session is not None
        result: types.ElicitResult | types.CreateMessageResult
        try:
            if kind == Kind.ELICITATION:
                elicit = types.ElicitRequest(params=_elicit_params(params))
                result = await self.session.send_request(elicit, types.ElicitResult)
            else:
                sample = types.CreateMessageRequest(
                    params=types.CreateMessageRequestParams.model_validate(params)
                )
                result = await self.session.send_request(sample, types.CreateMessageResult)
        except MCPError as exc:
            if exc.data != REFUSED_BY:
                raise
            raise UsageError(exc.message, hint=_ANSWER_IT) from exc
        except pydantic.ValidationError as exc:  # read, but not the answer the request wants
            raise UsageError(
                f"the host's answer is not a valid {kind} result: {_first(exc)}", _ANSWER_IT
            ) from exc
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def undeclared(caps: types.ClientCapabilities | None, kind: str, params: dict[str, Any]) -> str | None:
    """Why a host with capabilities `caps` cannot answer a `kind` question; None when it declared it
    can (a bare `elicitation: {}` predates URL mode and means form only)."""
    if kind == Kind.SAMPLING:
        return None if caps and caps.sampling else "the host did not declare the sampling capability"
    wanted = caps.elicitation if caps else None
    if wanted is None:
        return "the host did not declare the elicitation capability"
    if params.get("mode") == "url":
        return None if wanted.url else "the host did not declare URL-mode elicitation"
    if wanted.form is not None or wanted.url is None:
        return None
    return "the host declared only URL-mode elicitation"


_ANSWER_IT = "Answer the question with respond_to_elicitation / respond_to_sampling."


def _first(exc: pydantic.ValidationError) -> str:
    """The first thing wrong, naming its field (the input itself is not shown)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    return ".".join(str(part) for part in ("result", *error["loc"])) + f": {error['msg']}"


def refused_answer(request_id: types.RequestId, why: str) -> types.JSONRPCError:
    """What the host's unusable answer to our request `request_id` becomes (`why` names the field):
    that request's failure, in the words the model and the log will read."""
    message = f"the host's answer could not be used: {why}"
    error = types.ErrorData(code=types.INVALID_REQUEST, message=message, data=REFUSED_BY)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def _elicit_params(params: dict[str, Any]) -> types.ElicitRequestParams:
    if params.get("mode") == "url":
        return types.ElicitRequestURLParams.model_validate(params)
    return types.ElicitRequestFormParams.model_validate(params)
