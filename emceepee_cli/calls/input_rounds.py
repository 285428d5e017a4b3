"""The input rounds of a 2026-07-28 call: the loop that answers them, and serve's way to answer.

A backend speaking 2026-07-28 answers a call that needs input with an `InputRequiredResult`: the
questions (exactly this call's) and an opaque `requestState`. `until_result` sends the call again
with the round's answers and state until a result comes; a round without questions ("poll
again") is sent again after a pause that grows with the rounds. It is the one loop for every
caller, which brings its own `Answer`: serve's calls (calls/steps.py) use `Rounds.answer`, and a
one-shot `emceepee call` (calls/oneshot.py) asks at the terminal.

`Rounds.answer` parks each round's questions like any other; the state and the round number are
journaled with the task, so that a `serve` that adopts the call after a restart (`last_round`)
can answer that round and call again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import mcp_types as types

from emceepee_cli.calls.call import Call
from emceepee_cli.errors import BackendError
from emceepee_cli.questions.answers import backend_reply
from emceepee_cli.questions.questions import Question, Questions
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import Kind

KINDS: dict[type, Kind] = {types.ElicitRequest: Kind.ELICITATION, types.CreateMessageRequest: Kind.SAMPLING}
POLL_PAUSE_S = 0.05  # before sending a "poll again" round: this, times the round's number…
POLL_PAUSE_MAX_S = 0.25  # …up to this

# The call's result (or its next round), and the resume token the result carries (if any).
Reply = tuple[types.CallToolResult | types.InputRequiredResult, str | None]
# One tools/call of the call, with the last round's answers and request state (None the first time).
Send = Callable[[types.InputResponses | None, str | None], Awaitable[Reply]]
# The answers to one round's questions, given its request state and its number (1, 2, …).
Answer = Callable[[types.InputRequests, str | None, int], Awaitable[types.InputResponses]]


async def until_result(
    send: Send,
    answer: Answer,
    *,
    state: str | None = None,
    responses: types.InputResponses | None = None,
    number: int = 0,
) -> tuple[types.CallToolResult, str | None]:
    """Send the call, answering its input rounds, until the backend gives a result (with its resume
    token). A call taken up after a restart starts from its last round's `state`, `responses` and
    `number`."""
    while True:
        result, token = await send(responses, state)
        if isinstance(result, types.CallToolResult):
            return result, token
        number += 1
        state = result.request_state
        if result.input_requests:
            responses = await answer(result.input_requests, state, number)
        else:  # "poll again"
            responses = None
            await anyio.sleep(poll_pause_s(number))


def poll_pause_s(number: int) -> float:
    """How long to wait before sending round `number`'s "poll again": longer as the rounds go on."""
    return min(POLL_PAUSE_S * number, POLL_PAUSE_MAX_S)


@dataclass(frozen=True)
class Round:
    """Where a 2026-07-28 call stands: the backend's state and the questions of its last round."""

    request_state: str | None
    asked: dict[str, Question]  # input key -> its question, still to be answered (or already answered)
    number: int


RootsFn = Callable[[str], Awaitable[types.ListRootsResult]]  # a server's roots, as it is answered


class Rounds:
    def __init__(self, journal: AsyncJournal, questions: Questions, runtime: Runtime, roots: RootsFn) -> None:
        self.journal = journal
        self.questions = questions
        self.runtime = runtime
        self.roots = roots

    def __repr__(self) -> str:
        return f"<Rounds {self.questions!r}>"

    async def answer(
        self,
        call: Call,
        requests: types.InputRequests,
        state: str | None,
        number: int,
        promote: Callable[[Call], Awaitable[None]],
    ) -> types.InputResponses:
        """Park the round's questions (exactly correlated), journal the round, collect the answers."""
        asked: dict[str, Question] = {}
        responses: types.InputResponses = {}
        for key, request in requests.items():
            if isinstance(request, types.ListRootsRequest):  # the same roots a roots/list request gets
                responses[key] = await self.roots(call.server)
                continue
            kind = KINDS.get(type(request))
            if kind is None:  # nothing else is asked in rounds today; an empty answer keeps the call going
                responses[key] = types.ListRootsResult(roots=[])
                continue
            params = request.params.model_dump(mode="json", exclude_none=True)
            asked[key] = await self.questions.ask(
                call.server,
                kind,
                params,
                task_id=call.call_id,
                correlation="exact",
                input_key=key,
                round_=number,
                announce=False,  # once all are asked: a host's input round then carries them all
            )
        if asked:
            self.questions.announce(call.server, call.call_id)
        await promote(call)  # its state is journaled with its task row, so the task must exist
        with anyio.CancelScope(shield=True):
            await self.runtime.guarded(
                lambda: self.journal.run(self.journal.sync.tasks.set_round, call.call_id, state, number)
            )
        return responses | await self.collect(asked)

    async def collect(self, asked: dict[str, Question]) -> types.InputResponses:
        """The answers to a round's questions, once all are settled; a refused one fails the call."""
        responses: types.InputResponses = {}
        for key, question in asked.items():
            row = await self.questions.wait(question)
            reply = backend_reply(row)
            if (
                isinstance(reply, types.ErrorData)
                and row.get("error_detail")
                and row.get("answered_by") == "model"
            ):
                # a 2026-07-28 backend has no slot for an error in its input responses
                raise BackendError(
                    f"The client refused step {row['request_id']} of this call: {reply.message} "
                    f"(code {reply.code})"
                )
            if isinstance(reply, types.ErrorData):
                raise BackendError(
                    f"The question {row['request_id']} for this call was {row['status']}: {row.get('error')}"
                )
            responses[key] = reply
        return responses

    async def last_round(self, task_id: str, request_state: str | None, number: int) -> Round:
        """An adopted call's last round, its journaled questions held again by this process."""
        rows = await self.journal.run(self.journal.sync.pending.rows, status=None, task_id=task_id)
        asked = {str(r["input_key"]): self.questions.adopt(r) for r in rows if r["round"] == number}
        return Round(request_state, asked, number)
