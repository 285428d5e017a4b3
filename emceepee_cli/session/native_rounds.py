"""A backend's questions while it answers a host's `prompts/get` or `resources/read`, in input
rounds of that request, and the input rounds of a 2026-07-28 backend's answer to one.

Toward the backend. A 2026-07-28 backend that needs input answers these requests with an
`InputRequiredResult`, as it does a tool call. `drive` asks each round's questions (parked like
any other, so whoever answers first wins) and sends the request again with the answers and the
backend's state, until a result comes. A handshake-era backend asks by sending requests, which
session/backend_sink.py parks and ties to the host's request held here when it is the only
request in flight on that backend (`asking`).

Toward a 2026-07-28 host, whose request declared what it can answer. Such a request is `Held`:
the backend request runs in serve's task group, and the handler waits until it ends (its result
or error, as a plain request gets) or until it waits on questions of its own that the request can
answer. Those come back as an `InputRequiredResult` of the host's request, with a `request_state`
sealed under the install key (seal.py) that names the held request, the round's questions and
number, the request (method, name or URI, arguments), this serve and an expiry (the questions'
own). The host's retry is checked as a tool call's is (calls/host_rounds.py): forged or altered,
expired, another serve's or another request's, or used already, each is refused (-32602) saying
what to do; then every answer, before any is recorded. Then the handler waits again.

There is no journaled task behind such a request: it is held in this process's memory only
(`HELD_MAX` at once; past that a request is passed on as for a host that cannot answer). A
retry after a restart of serve is refused, saying to send the request again. A host that does not
come back leaves the questions parked, answerable from the CLI and the meta-tools until they
expire; the held request is cancelled once its last round has expired with nobody waiting on it,
and an unread result is dropped then.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession

from emceepee_cli import seal
from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls.host_rounds import checked_answers, input_request
from emceepee_cli.calls.input_rounds import KINDS, Rounds, poll_pause_s
from emceepee_cli.errors import BackendError, UsageError
from emceepee_cli.ids import new_id
from emceepee_cli.questions.questions import Question, Questions
from emceepee_cli.runtime import Runtime

log = logging.getLogger(__name__)

T = TypeVar("T")
PREFIX = "emn1."  # a held request's round state, told from a tool call's (emr1.) at a glance
HELD_MAX = 64  # host requests held between rounds at once; each holds one backend request
EXPIRY_CHECK_S = 1.0  # how often a held request past its last round's expiry is looked at

# The backend's answer to the request, sent again with a round's answers and state.
Send = Callable[[ClientSession, types.InputResponses | None, str | None], Awaitable[Any]]
RootsOf = Callable[[Backend], Awaitable[types.ListRootsResult]]


@dataclass(frozen=True)
class HostAsk:
    """What a 2026-07-28 host's request brings: what it can answer, and a retry's state and answers."""

    caps: types.ClientCapabilities
    state: str | None = None
    responses: types.InputResponses | None = None


@dataclass(eq=False)
class Held:
    """A host's request passed to a backend, held across the host's input rounds."""

    server: str
    method: str
    digest: str  # of the request: method, name or URI, arguments
    held_id: str = field(default_factory=new_id)
    asked: list[Question] = field(default_factory=list[Question])
    changed: anyio.Event = field(default_factory=anyio.Event)
    delivered: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    result: Any = None
    error: BaseException | None = None
    done: bool = False
    offered: int = 0  # rounds sent to the host
    taken: int = 0  # rounds the host answered
    waiting: int = 0  # handlers waiting on it now
    expires: float = math.inf  # its last round's expiry

    def __repr__(self) -> str:
        return f"<Held {self.held_id} {self.method} {self.server} round {self.offered}>"

    def nudge(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def tie(self, question: Question) -> None:
        """A question the backend asked while answering this request."""
        self.asked.append(question)
        self.nudge()


class NativeRounds:
    def __init__(
        self, questions: Questions, runtime: Runtime, install_key: bytes, instance_id: str, roots: RootsOf
    ) -> None:
        self.questions = questions
        self.runtime = runtime
        self.install_key = install_key
        self.instance_id = instance_id
        self.roots = roots
        self.rounds = Rounds(questions.journal, questions, runtime, lambda server: _no_roots())
        self.held: dict[str, Held] = {}

    def __repr__(self) -> str:
        return f"<NativeRounds held={len(self.held)}>"

    def asking(self, server: str) -> list[Held]:
        """The held requests still waiting on `server`'s answer (one may be asking it a question)."""
        return [h for h in self.held.values() if h.server == server and not h.done]

    # ---- a host's request -----------------------------------------------------------------

    async def request(
        self, backend: Backend, what: str, send: Send, target: tuple[str, str, Any], ask: HostAsk | None
    ) -> Any:
        """The backend's answer to the host's request `target` (method, name or URI, arguments):
        passed on as it is for a host that cannot answer in rounds (`ask` None), else held (a
        retry: taken up again), its questions coming back as input rounds."""
        digest = seal.call_digest(*target)
        if ask is not None and (ask.state is not None or ask.responses is not None):
            return await self._retry(ask, target[0], digest)
        if ask is None or len(self.held) >= HELD_MAX:
            if ask is not None:
                log.warning("%d host requests held already: %s is passed on without rounds", HELD_MAX, what)
            return await self.drive(backend, what, send, None)
        held = Held(backend.name, target[0], digest)
        self.held[held.held_id] = held
        self.runtime.spawn(self._run, held, backend, what, send, name=f"held {what}")
        return await self._next(held, ask.caps)

    async def drive(self, backend: Backend, what: str, send: Send, held: Held | None) -> Any:
        """Send the request, answering a 2026-07-28 backend's input rounds, until its result."""
        state: str | None = None
        responses: types.InputResponses | None = None
        number = 0
        while True:
            result = await backend.request(what, functools.partial(_sent, send, responses, state))
            if not isinstance(result, types.InputRequiredResult):
                return result
            number += 1
            state = result.request_state
            if result.input_requests:
                responses = await self._answer(backend, result.input_requests, number, held)
            else:  # "poll again"
                responses = None
                await anyio.sleep(poll_pause_s(number))

    async def _answer(
        self, backend: Backend, requests: types.InputRequests, number: int, held: Held | None
    ) -> types.InputResponses:
        """A backend round's answers: its questions parked (and tied to `held`), then collected."""
        asked: dict[str, Question] = {}
        responses: types.InputResponses = {}
        for key, request in requests.items():
            if isinstance(request, types.ListRootsRequest):  # the same roots a roots/list request gets
                responses[key] = await self.roots(backend)
                continue
            kind = KINDS[type(request)]
            params = request.params.model_dump(mode="json", exclude_none=True)
            asked[key] = await self.questions.ask(
                backend.name,
                kind,
                params,
                task_id=None,
                correlation="exact",
                input_key=key,
                round_=number,
                announce=held is None,
            )
            if held is not None:
                held.tie(asked[key])
        return responses | await self.rounds.collect(asked)

    async def _run(self, held: Held, backend: Backend, what: str, send: Send) -> None:
        """The held backend request, in serve's task group; its outcome is kept until it is read,
        or until its last round expires."""
        with held.scope:
            try:
                held.result = await self.drive(backend, what, send, held)
            except Exception as exc:  # noqa: BLE001 - it is the host's answer, raised to it
                held.error = exc
        if held.result is None and held.error is None:
            held.error = BackendError(f"{what} was stopped: nobody waited on it past its questions' expiry")
        held.done = True
        held.nudge()
        keep_s = held.expires - time.time() if held.offered else 0.0  # else read at once, or by nobody
        with anyio.move_on_after(max(0.0, keep_s)):
            await held.delivered.wait()
        self.held.pop(held.held_id, None)

    async def _bounded(self, held: Held) -> None:
        """Cancel the held request once its last round has expired and nobody waits on it."""
        while not held.done:
            if held.expires <= time.time() and held.waiting == 0:
                log.info("%r: its last round expired unanswered; the backend request is cancelled", held)
                held.scope.cancel()
                return
            await anyio.sleep(EXPIRY_CHECK_S)

    async def _next(self, held: Held, caps: types.ClientCapabilities) -> Any:
        """Wait on the held request: its result (its error raised), or its next round."""
        held.waiting += 1
        try:
            while not held.done:
                if (round_ := self._offer(held, caps)) is not None:
                    return round_
                await held.changed.wait()
        except anyio.get_cancelled_exc_class():
            if held.offered == 0:  # the host gave up before any round: so does the backend request
                held.scope.cancel()
            raise
        finally:
            held.waiting -= 1
        held.delivered.set()
        self.held.pop(held.held_id, None)
        if held.error is not None:
            raise held.error
        return held.result

    def _offer(self, held: Held, caps: types.ClientCapabilities) -> types.InputRequiredResult | None:
        """The held request's open questions this request can answer, as an input round; None: none."""
        asked: dict[str, types.InputRequest] = {}
        expires = math.inf
        for question in held.asked:
            if question.answered.is_set() or question.forwarding or not question.blocks_call:
                continue
            why = self.questions.why_not_in_round(question.row, caps)
            request = input_request(question.row) if why is None else None
            if request is None:
                log.info("question %s stays parked, not in an input round: %s", question.request_id, why)
                continue
            asked[question.request_id] = request
            expires = min(expires, datetime.fromisoformat(question.row["expires_at"]).timestamp())
        if not asked:
            return None
        held.offered += 1
        if held.offered == 1:
            self.runtime.spawn(self._bounded, held, name=f"bound {held!r}")
        held.expires = expires
        claims = {
            "p": "native",
            "h": held.held_id,
            "m": held.method,
            "c": held.digest,
            "s": list(asked),
            "r": held.offered,
            "i": self.instance_id,
            "exp": int(expires),
        }
        self.questions.shown(asked)
        state = seal.seal(self.install_key, claims, PREFIX)
        return types.InputRequiredResult(input_requests=asked, request_state=state)

    # ---- the host's retry ---------------------------------------------------------------------

    async def _retry(self, ask: HostAsk, method: str, digest: str) -> Any:
        """Check a retry and record its answers (nothing, when any is wrong); then wait again."""
        if ask.state is None:
            raise UsageError(
                "input_responses came without the request_state of the round they answer.",
                hint="Send the request_state exactly as the input round gave it, beside the answers.",
            )
        claims = self.verify(ask.state, method, digest)
        held = self.held.get(str(claims["h"]))
        if held is None:
            raise UsageError(
                f"The {method} this request_state continues has ended (its result was not read in "
                "time) or was cancelled; its questions, if still pending, can be answered by other means.",
                hint=f"Send the {method} again without request_state.",
            )
        number = int(claims["r"])
        if number <= held.taken:
            raise UsageError(
                f"Round {number} of this {method} was already answered; a request_state is used once.",
                hint="Send the request_state of the newest round, or the request again without one.",
            )
        answers = checked_answers(claims, [q.row for q in held.asked], ask.responses or {})
        held.taken = number
        for request_id, answer in answers.items():
            try:
                await self.questions.answer(request_id, answer, by="host")
            except UsageError as exc:  # answered meanwhile by the CLI or the model: the first answer won
                log.info("the host's answer to %s was not recorded: %s", request_id, exc.message)
        return await self._next(held, ask.caps)

    def verify(self, state: str, method: str, digest: str) -> dict[str, Any]:
        """The claims of a round's state that this serve issued for this very request, unexpired."""
        claims = seal.unseal(self.install_key, state.strip(), PREFIX)
        if claims is None or claims.get("p") != "native":
            raise UsageError(
                "This request_state was not issued by this emceepee, or was altered.",
                hint=f"Send the request_state exactly as the input round gave it; or send the {method} "
                "again without one.",
            )
        if claims["exp"] < time.time():
            raise UsageError(
                f"This request_state of a {claims['m']} has expired: its questions waited past their "
                "timeout.",
                hint=f"Send the {method} again without request_state.",
            )
        if claims.get("i") != self.instance_id:
            raise UsageError(
                f"This request_state of a {claims['m']} was issued by another emceepee process: this one "
                "started since (a prompts/get or resources/read is not kept across a restart), or "
                "serves another host.",
                hint=f"Send the {method} again without request_state.",
            )
        if claims.get("m") != method or claims.get("c") != digest:
            raise UsageError(
                f"This request_state belongs to another request (a {claims['m']}), not to this {method} "
                "with these arguments.",
                hint="Send a round's answers with the same name or URI and arguments as the request it "
                "came from.",
            )
        return claims


async def _sent(
    send: Send, responses: types.InputResponses | None, state: str | None, session: ClientSession
) -> Any:
    return await send(session, responses, state)


async def _no_roots() -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])
