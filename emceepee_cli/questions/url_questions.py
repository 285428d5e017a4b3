"""A backend that answers a call with "URL elicitation required" (JSON-RPC -32042): the user must
open a URL (to authorize a service, typically) before the tool can run.

Nothing of it is dropped: each URL becomes a parked URL-mode question (forwarded to a host that
takes URL elicitation), and the call fails with the URLs, their elicitation ids and question ids,
so the model can show them and call the tool again once the user is done. A backend that reports
the same elicitation again gets the question already parked, not a second one. When the backend
announces the elicitation complete (`notifications/elicitation/complete`) the question is settled
and the model hears it through an event.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import MCPError
from pydantic import ValidationError

from emceepee_cli.errors import BackendError
from emceepee_cli.questions.questions import Questions
from emceepee_cli.store.records import Kind, params_of

CORRELATION = "url_required"  # the question belongs to no call: the call ended when it was asked


class UrlElicitationRequired(BackendError):
    """The backend needs the user to open URLs first; `elicitations` are their request params."""

    def __init__(self, message: str, elicitations: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.elicitations = elicitations


def required(server: str, what: str, exc: MCPError) -> UrlElicitationRequired | None:
    """The error for a -32042 answer (None for any other): its URL elicitations, checked."""
    if exc.code != types.URL_ELICITATION_REQUIRED:
        return None
    data = exc.error.data if isinstance(exc.error.data, dict) else {}
    found: list[dict[str, Any]] = []
    for item in data.get("elicitations") or []:
        try:
            params = types.ElicitRequestURLParams.model_validate(item)
        except ValidationError:
            continue  # an elicitation without a URL or id cannot be shown or completed
        found.append(params.model_dump(mode="json", exclude_none=True))
    return UrlElicitationRequired(f"Backend '{server}' needs the user to open a URL before {what}", found)


async def park(questions: Questions, server: str, tool: str, exc: UrlElicitationRequired) -> BackendError:
    """Park each URL as a question (or find it parked already); the error the call ends with."""
    if not exc.elicitations:
        return BackendError(
            f"{exc.message}, but sent no URL emceepee could read.",
            hint=f"get_logs(server='{server}') may say more; call the tool again later.",
        )
    lines = []
    for params in exc.elicitations:
        question = (
            _parked(questions, server, params["elicitation_id"])
            or (
                await questions.ask(
                    server, Kind.ELICITATION, params, task_id=None, correlation=CORRELATION, blocks_call=False
                )
            ).request_id
        )
        ids = f"question {question}, elicitation {params['elicitation_id']}"
        lines.append(f"- {params['message']}: {params['url']} ({ids})")
    return BackendError(
        f"{exc.message}. Show the user each URL to open:\n" + "\n".join(lines),
        hint=f"Once the user is done, call {tool} again. A person can also open one with "
        "`emceepee answer QUESTION_ID --open`; respond_to_elicitation(QUESTION_ID, action='accept') records "
        "their consent.",
    )


def _parked(questions: Questions, server: str, elicitation_id: str) -> str | None:
    for question in questions.live.values():
        row = question.row
        if (
            row["server"] == server
            and not question.answered.is_set()
            and params_of(row).get("elicitation_id") == elicitation_id
        ):
            return question.request_id
    return None


async def completed(questions: Questions, server: str, elicitation_id: str) -> None:
    """The backend says the user finished: settle the question and tell the model."""
    request_id = _parked(questions, server, elicitation_id)
    if request_id is None:
        return
    if await questions.settle(request_id, "accepted", answer={"action": "accept"}, by=server):
        questions.live.pop(request_id, None)
        questions.events.emit(
            "elicitation_complete",
            server,
            {
                "request_id": request_id,
                "elicitation_id": elicitation_id,
                "hint": "The user finished in the browser: call the tool that needed it again.",
            },
        )
