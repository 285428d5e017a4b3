"""The host's side of `serve`: its session, what it can answer, and asking it a backend's question.

The session is noted at the host's first tool call (it is the one a background task can send
requests on, in the handshake era). A question may be forwarded when the host can send requests
at all; under the `auto` policy, only when the host also declared it can answer that kind.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession

from emceepee_cli.store.records import Kind


class HostLink:
    def __init__(self) -> None:
        self.session: ServerSession | None = None
        self.noted = False

    def __repr__(self) -> str:
        return f"<HostLink {'connected' if self.session else 'not yet seen'}>"

    def note(self, session: ServerSession) -> types.Implementation | None:
        """Keep the host's session, once; who the host is, the first time only."""
        if self.noted or session.client_params is None:
            return None
        self.noted = True
        self.session = session
        return session.client_params.client_info

    def can_send(self) -> bool:
        return self.session is not None and self.session.can_send_request

    def can_forward(self, kind: str, params: dict[str, Any]) -> bool:
        """The host can send requests and declared it can answer this kind of question."""
        if self.session is None or not self.can_send():
            return False
        caps = self.session.client_capabilities
        if kind == Kind.SAMPLING:
            return bool(caps and caps.sampling)
        wanted = caps.elicitation if caps else None
        if wanted is None:
            return False
        url_mode = params.get("mode") == "url"
        return bool(wanted.url) if url_mode else (wanted.form is not None or wanted.url is None)

    async def forward(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """Ask the host; its answer as our snake_case JSON (not yet checked against the question)."""
        assert self.session is not None
        result: types.ElicitResult | types.CreateMessageResult
        if kind == Kind.ELICITATION:
            elicit = types.ElicitRequest(params=_elicit_params(params))
            result = await self.session.send_request(elicit, types.ElicitResult)
        else:
            sample = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams.model_validate(params)
            )
            result = await self.session.send_request(sample, types.CreateMessageResult)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _elicit_params(params: dict[str, Any]) -> types.ElicitRequestParams:
    if params.get("mode") == "url":
        return types.ElicitRequestURLParams.model_validate(params)
    return types.ElicitRequestFormParams.model_validate(params)
