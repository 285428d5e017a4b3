"""Input rounds toward a 2026-07-28 host: a call's own questions, asked in the reply to that call.

A 2026-07-28 host takes no requests from a server. A server that needs input returns an
`InputRequiredResult` (the questions, and a `request_state`), and the host sends the same
`tools/call` again with its answers (`input_responses`) and that state. Lifecycle of one round:

1. The call waits on a question of its own (one labelled with it: `exact` or `sole`), and the
   host's request declared it can answer that kind (`Questions.why_not_in_round`). The call is a
   journaled task by then (calls/tasks.py promotes it first), and `offer` makes the reply: the
   questions keyed by their ids, and a state sealed under the install key (seal.py) that names the
   task, the questions, the round's number, the call (server, tool, arguments), this serve, and an
   expiry (the questions' own).
2. The host answers them through its own form or LLM, and retries. `take` checks the state (forged
   or altered, expired, issued by an emceepee that has restarted since, or for another call: each
   refused, saying what to do), then every answer before any is recorded (its key is one of the
   round's, its size, its kind and schema, who may accept an approval), then marks the round used
   in the journal, once (a replayed state is refused), then records the answers `by="host"`. The
   first answer wins, as for any question: one the CLI or the model gave meanwhile stays.
3. The caller waits on the call again, as execute_tool does: its result, the next round, or the task.

The questions stay parked all along, so a host that never comes back leaves a task whose questions
the CLI and the meta-tools can answer, exactly as for a host that cannot answer at all. A round is
never sent without questions: an empty "poll again" round would use up the host's own limit on
rounds (the SDK client allows ten), so a call still running after the wait is a task instead.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import mcp_types as types

from emceepee_cli import seal
from emceepee_cli.calls.call import Call, InputRound
from emceepee_cli.errors import EmceepeeError, UsageError
from emceepee_cli.questions.answers import check_answer, check_approver
from emceepee_cli.questions.questions import Questions
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import Kind, PendingRow, params_of

log = logging.getLogger(__name__)

PREFIX = "emr1."  # tells a round's state from emceepee's other sealed tokens at a glance
ANSWER_MAX_BYTES = {  # one answer, as JSON: a form's values are short; a completion may hold an image
    Kind.ELICITATION: 1024 * 1024,
    Kind.SAMPLING: 16 * 1024 * 1024,
}
SHOWN_KEY_CHARS = 80  # of a key the round does not know, in the error


@dataclass(frozen=True)
class HostRetry:
    """A 2026-07-28 host's retry of a call: the state of the round it answers, and its answers."""

    state: str | None
    responses: types.InputResponses | None


class HostRounds:
    def __init__(
        self, journal: AsyncJournal, questions: Questions, install_key: bytes, instance_id: str
    ) -> None:
        self.journal = journal
        self.questions = questions
        self.install_key = install_key
        self.instance_id = instance_id

    def __repr__(self) -> str:
        return f"<HostRounds {self.instance_id}>"

    # ---- a round out ---------------------------------------------------------------------

    async def offer(self, call: Call, caps: types.ClientCapabilities) -> InputRound | None:
        """The call's own open questions that a request declaring `caps` can answer, as a round;
        None when there are none, or when the call's task is not journaled (a round's use could
        not be recorded, so the call stays the task it is)."""
        if call.unjournaled is not None or call.ended:
            return None
        askable = self._askable(call, caps)
        if not askable:
            return None
        try:
            number = await self.journal.run(self.journal.sync.tasks.host_round, call.call_id) + 1
        except EmceepeeError as exc:  # the journal failed: no round whose use could not be kept
            log.warning("no input round for task %s: %s", call.call_id, exc.message)
            return None
        asked = {row["request_id"]: request for row, request in askable}
        expires = min(datetime.fromisoformat(row["expires_at"]).timestamp() for row, _ in askable)
        claims = {
            "p": "round",
            "t": call.call_id,
            "s": list(asked),
            "r": number,
            "c": seal.call_digest(call.server, call.tool, call.args),
            "i": self.instance_id,
            "exp": int(expires),
        }
        self.questions.shown(asked)
        return InputRound(call.call_id, asked, seal.seal(self.install_key, claims, PREFIX))

    def _askable(
        self, call: Call, caps: types.ClientCapabilities
    ) -> list[tuple[PendingRow, types.InputRequest]]:
        """The call's own questions that block it and that this request can answer, with each as
        the request the host is to get."""
        out = []
        for listed in self.questions.listed(task_id=call.call_id):
            question = self.questions.live[listed["request_id"]]
            why = self.questions.why_not_in_round(question.row, caps)
            request = input_request(question.row) if why is None else None
            if question.blocks_call and request is not None:
                out.append((question.row, request))
            elif why is not None:
                log.info("question %s stays parked, not in an input round: %s", question.request_id, why)
        return out

    # ---- its answers in ------------------------------------------------------------------

    async def take(self, retry: HostRetry, server: str, tool: str, args: dict[str, Any] | None) -> str:
        """Check a host's retry of the call `server.tool(args)` and record its answers; the id of the
        task it goes on with. A UsageError says what is wrong and what to do; nothing is recorded then."""
        if retry.state is None:
            raise UsageError(
                "input_responses came without the request_state of the round they answer.",
                hint="Send the request_state exactly as the input round gave it, beside the answers.",
            )
        claims = self.verify(retry.state, server, tool, args)
        task_id, number = str(claims["t"]), int(claims["r"])
        rows = await self.journal.run(self.journal.sync.pending.rows, status=None, task_id=task_id)
        answers = checked_answers(claims, rows, retry.responses or {})
        if not await self.journal.run(self.journal.sync.tasks.take_host_round, task_id, number):
            raise UsageError(
                f"Round {number} of task {task_id} was already answered; a request_state is used once.",
                hint=f"get_task_result(task_id='{task_id}') gives the call's result, or the questions it "
                "waits on now.",
            )
        for request_id, answer in answers.items():
            try:
                await self.questions.answer(request_id, answer, by="host")
            except UsageError as exc:  # answered meanwhile by the CLI or the model: the first answer won
                log.info("the host's answer to %s was not recorded: %s", request_id, exc.message)
        return task_id

    def verify(self, state: str, server: str, tool: str, args: dict[str, Any] | None) -> dict[str, Any]:
        """The claims of a round's state that this serve issued for this very call, unexpired."""
        claims = seal.unseal(self.install_key, state.strip(), PREFIX)
        if claims is None or claims.get("p") != "round":
            raise UsageError(
                "This request_state was not issued by this emceepee, or was altered.",
                hint="Send the request_state exactly as the input round gave it; or call the tool again "
                "without one, which starts a new call.",
            )
        task_id = claims["t"]
        if claims["exp"] < time.time():
            raise UsageError(
                f"This request_state (task {task_id}) has expired: its questions waited past their timeout.",
                hint=f"get_task_result(task_id='{task_id}') says how the call ended; call the tool again "
                "to start over.",
            )
        if claims.get("i") != self.instance_id:
            raise UsageError(
                f"This request_state (task {task_id}) was issued by another emceepee process: this one "
                "started since, or serves another host. The call is kept as that task: if it goes on, its "
                "questions wait to be answered.",
                hint="Answer them with respond_to_elicitation / respond_to_sampling (or `emceepee answer` "
                f"in a terminal), then get_task_result(task_id='{task_id}').",
            )
        if claims.get("c") != seal.call_digest(server, tool, args):
            raise UsageError(
                f"This request_state belongs to another call (task {task_id}), not to {server}.{tool} "
                "with these arguments.",
                hint="Send a round's answers with the same tool and arguments as the call it came from.",
            )
        return claims


def checked_answers(
    claims: dict[str, Any], rows: list[PendingRow], responses: types.InputResponses
) -> dict[str, dict[str, Any]]:
    """The host's answers to the round's questions still pending, each checked as any answer is,
    by question id; a UsageError naming the first one wrong (nothing is recorded then). A question
    answered meanwhile (by the CLI, the model) is left out: its first answer stands."""
    asked = [str(request_id) for request_id in claims["s"]]
    by_id = {row["request_id"]: row for row in rows}
    answers: dict[str, dict[str, Any]] = {}
    for key, response in responses.items():
        if key not in asked:
            raise UsageError(
                f"input_responses has '{key[:SHOWN_KEY_CHARS]}', which is no question of this round "
                f"(its questions: {', '.join(asked)}). Nothing was recorded.",
                hint="Answer each question under the key its input request had.",
            )
        row = by_id.get(key)
        if row is None or row["status"] != "pending":
            continue
        answers[key] = checked_answer(row, response)
    return answers


def checked_answer(row: PendingRow, response: types.InputResponse) -> dict[str, Any]:
    """One answer as it is recorded (our JSON), once it fits its question; else a UsageError."""
    key = row["request_id"]
    answer: dict[str, Any] = response.model_dump(by_alias=True, mode="json", exclude_none=True)
    size, limit = len(json.dumps(answer)), ANSWER_MAX_BYTES[Kind(row["kind"])]
    if size > limit:
        raise UsageError(
            f"input_responses['{key}'] is {size / 1048576:.1f} MiB; {row['kind']} answers may be at most "
            f"{limit // 1048576} MiB. Nothing was recorded; the question is still pending.",
            hint="Answer it with less, or decline it.",
        )
    try:
        check_answer(row, answer)
        check_approver(row, answer, "host")
    except UsageError as exc:
        raise UsageError(f"input_responses['{key}']: {exc.message}", hint=exc.hint) from exc
    return answer


def input_request(row: PendingRow) -> types.InputRequest | None:
    """A question as the request an input round carries; None for one whose params are not a
    valid request (it stays parked for the other ways to answer)."""
    params = params_of(row)
    try:
        if row["kind"] == Kind.SAMPLING:
            return types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(params))
        if params.get("mode") == "url":
            return types.ElicitRequest(params=types.ElicitRequestURLParams.model_validate(params))
        return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(params))
    except ValueError as exc:  # pydantic's ValidationError is one
        log.warning("question %s cannot go in an input round: %s", row["request_id"], exc)
        return None
