"""The one loop of a 2026-07-28 call's input rounds (calls/input_rounds.py), as serve's calls and
`emceepee call` both run it: each round's answers and state go with the next send, a round without
questions is sent again after a growing pause, and a call taken up at its last round goes on from
there. The real backends' rounds are in tests/core/test_tasks.py, tests/e2e/test_serve_input.py and
tests/cli/test_call.py."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from emceepee_cli.calls.input_rounds import POLL_PAUSE_MAX_S, Reply, poll_pause_s, until_result

pytestmark = pytest.mark.anyio

DATE = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="When?", requested_schema={"type": "object", "properties": {"date": {"type": "string"}}}
    )
)
ANSWER = types.ElicitResult(action="accept", content={"date": "2026-05-01"})
DONE = types.CallToolResult(content=[types.TextContent(type="text", text="booked")])
Sent = tuple[types.InputResponses | None, str | None]


class Backend:
    """Answers each send with the next of `replies`, noting what each send carried."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.sent: list[Sent] = []
        self.asked: list[tuple[types.InputRequests, str | None, int]] = []

    async def send(self, responses: types.InputResponses | None, state: str | None) -> Reply:
        self.sent.append((responses, state))
        return self.replies.pop(0)

    async def answer(
        self, requests: types.InputRequests, state: str | None, number: int
    ) -> types.InputResponses:
        self.asked.append((requests, state, number))
        return {key: ANSWER for key in requests}


def round_of(state: str, **requests: types.InputRequest) -> Reply:
    return types.InputRequiredResult(input_requests=requests or None, request_state=state), None


async def test_each_rounds_answers_and_state_go_with_the_next_send_until_a_result() -> None:
    backend = Backend(round_of("s1", date=DATE), round_of("s2", again=DATE), (DONE, "token-1"))
    with anyio.fail_after(5):
        done = await until_result(backend.send, backend.answer)
    assert done == (DONE, "token-1")
    assert backend.sent == [(None, None), ({"date": ANSWER}, "s1"), ({"again": ANSWER}, "s2")]
    assert [(list(requests), state, number) for requests, state, number in backend.asked] == [
        (["date"], "s1", 1),
        (["again"], "s2", 2),
    ]


async def test_a_round_without_questions_is_polled_again_with_no_answers() -> None:
    backend = Backend(round_of("wait"), round_of("s2", date=DATE), (DONE, None))
    with anyio.fail_after(5):
        done = await until_result(backend.send, backend.answer)
    assert done == (DONE, None)
    assert backend.sent == [(None, None), (None, "wait"), ({"date": ANSWER}, "s2")]
    assert [number for _, _, number in backend.asked] == [2]


def test_the_pause_before_polling_again_grows_with_the_rounds_up_to_a_bound() -> None:
    pauses = [poll_pause_s(n) for n in range(1, 10)]
    assert pauses == sorted(pauses) and pauses[0] > 0 and pauses[-1] == POLL_PAUSE_MAX_S


async def test_a_call_taken_up_at_its_last_round_goes_on_from_it() -> None:
    backend = Backend(round_of("s4", date=DATE), (DONE, None))
    with anyio.fail_after(5):
        await until_result(backend.send, backend.answer, state="s3", responses={"date": ANSWER}, number=3)
    assert backend.sent == [({"date": ANSWER}, "s3"), ({"date": ANSWER}, "s4")]
    assert [number for _, _, number in backend.asked] == [4]
