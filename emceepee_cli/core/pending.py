"""Questions from backends — elicitation (ask the user) and sampling (ask an LLM).

Lifecycle of one question: a backend asks (a handshake-era request to our callback, or one of
the `inputRequests` of a 2026-07-28 `InputRequiredResult`) → it is journaled as `pending` and
announced as an event → it is forwarded to the host when the host can answer and the policy
allows, and in any case parked, so that whoever answers first wins: the host's own form, the
model through `respond_to_*` / `resume_tool`, or a person with `emceepee answer` (the CLI writes
the journal; the owning `serve` notices within `WATCH_INTERVAL_S`). Every answer is checked
(an elicitation's content against its `requested_schema`) before it is accepted. A question
nobody answers expires; one the backend withdraws, or whose backend dies, is rejected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from emceepee_cli.clock import now_iso
from emceepee_cli.core import schema
from emceepee_cli.errors import BackendError, EmceepeeError, UsageError
from emceepee_cli.ids import new_id
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import (
    ElicitationStatus,
    PendingRow,
    QuestionJson,
    SamplingStatus,
    params_of,
    question_json,
)

if TYPE_CHECKING:
    from emceepee_cli.core.hub import Hub

Kind = str  # "elicitation" | "sampling"
ELICITATION, SAMPLING = "elicitation", "sampling"
ACTION_STATUS = {
    "accept": ElicitationStatus.ACCEPTED,
    "decline": ElicitationStatus.DECLINED,
    "cancel": ElicitationStatus.CANCELLED,
}


@dataclass(eq=False)
class Question:
    """A question this process is holding for a backend."""

    row: PendingRow
    answered: anyio.Event = field(default_factory=anyio.Event)
    forwarding: bool = False

    def __repr__(self) -> str:
        return f"<Question {self.request_id} {self.row['kind']} {self.row['server']} {self.row['status']}>"

    @property
    def request_id(self) -> str:
        return str(self.row["request_id"])


class Questions:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.live: dict[str, Question] = {}

    def __repr__(self) -> str:
        return f"<Questions live={len(self.live)}>"

    # ---- asking ------------------------------------------------------------------------------

    async def ask(
        self,
        server: str,
        kind: Kind,
        params: dict[str, Any],
        *,
        task_id: str | None,
        correlation: str,
        input_key: str | None = None,
        round_: int = 0,
    ) -> Question:
        timeout_s = self.hub.config.defaults.pending_timeout_ms / 1000
        row = PendingRow(
            request_id=new_id(),
            instance_id=self.hub.instance_id,
            server=server,
            kind=kind,
            params=json.dumps(params),
            status="pending",
            task_id=task_id,
            correlation=correlation,
            input_key=input_key,
            round=round_,
            forwarded=0,
            created_at=now_iso(),
            expires_at=now_iso(timeout_s),
            answered_at=None,
            answered_by=None,
            answer=None,
            error=None,
        )
        question = Question(row)
        try:
            with anyio.CancelScope(shield=True):
                await self.hub.journal.run(Journal.insert_pending, row)
        except EmceepeeError as exc:
            # Unjournaled, nobody could answer it from a terminal or after a restart: refuse it
            # now (the backend hears why) rather than list a question that cannot be settled.
            why = f"emceepee could not record it ({exc.message})"
            self.hub.log(server, "error", f"{kind} request refused: {why}", "emceepee")
            self.hub.events.emit("pending_refused", server, {"kind": kind, "task_id": task_id, "error": why})
            raise BackendError(
                f"Backend '{server}' asked a {kind} question that was refused: {why}."
            ) from exc
        self.live[question.request_id] = question
        self.hub.events.emit(
            "pending_request",
            server,
            {"request_id": question.request_id, "kind": kind, "task_id": task_id, "correlation": correlation},
        )
        if self._should_forward(server, kind, params):
            question.forwarding = True
            self.hub.spawn(self._forward, question, name=f"forward {question.request_id}")
        else:
            self.hub.tasks.question_arrived(server, task_id)
        return question

    def adopt(self, row: PendingRow) -> Question:
        """Hold a question journaled by a process that died (its call is being re-driven)."""
        question = Question(row)
        if row["status"] != "pending":
            question.answered.set()
        else:
            self.live[question.request_id] = question
        return question

    async def wait(self, question: Question) -> PendingRow:
        """The question's final row; if the wait is cancelled (the backend withdrew), it is rejected."""
        try:
            await question.answered.wait()
        finally:
            with anyio.CancelScope(shield=True):
                if not question.answered.is_set():
                    withdrawn = "the backend withdrew the request, or stopped"
                    await self.hub.guarded(
                        lambda: self.settle(question.request_id, "rejected", error=withdrawn)
                    )
                self.live.pop(question.request_id, None)
        return question.row

    # ---- forwarding to the host ---------------------------------------------------------------

    def _should_forward(self, server: str, kind: Kind, params: dict[str, Any]) -> bool:
        spec = self.hub.backends[server].spec if server in self.hub.backends else None
        defaults = self.hub.config.defaults
        policy = (getattr(spec, kind, None) if spec else None) or getattr(defaults, kind)
        upstream = self.hub.upstream
        if policy == "park" or upstream is None or not upstream.can_send_request:
            return False
        if policy == "forward":
            return True
        caps = upstream.client_capabilities
        if kind == SAMPLING:
            return bool(caps and caps.sampling)
        wanted = caps.elicitation if caps else None
        if wanted is None:
            return False
        url_mode = params.get("mode") == "url"
        return bool(wanted.url) if url_mode else (wanted.form is not None or wanted.url is None)

    async def _forward(self, question: Question) -> None:
        row = question.row
        upstream = self.hub.upstream
        assert upstream is not None
        try:
            with anyio.fail_after(self.hub.config.defaults.pending_timeout_ms / 1000):
                result: types.ElicitResult | types.CreateMessageResult
                if row["kind"] == ELICITATION:
                    elicit = types.ElicitRequest(params=_elicit_params(params_of(row)))
                    result = await upstream.send_request(elicit, types.ElicitResult)
                else:
                    sample = types.CreateMessageRequest(
                        params=types.CreateMessageRequestParams.model_validate(params_of(row))
                    )
                    result = await upstream.send_request(sample, types.CreateMessageResult)
            await self.answer(
                question.request_id,
                result.model_dump(by_alias=True, mode="json", exclude_none=True),
                by="host",
            )
        except EmceepeeError as exc:  # the host's answer was invalid, or someone answered first
            self.hub.log(
                row["server"],
                "warning",
                f"the host's answer to {question.request_id} was not used: {exc.message}",
                "emceepee",
            )
        except Exception as exc:  # noqa: BLE001 - forwarding is best effort: park instead
            self.hub.log(
                row["server"],
                "warning",
                f"forwarding {question.request_id} to the host failed ({exc!r}); parked",
                "emceepee",
            )
        finally:
            question.forwarding = False
            if not question.answered.is_set():
                self.hub.tasks.question_arrived(row["server"], row["task_id"])

    # ---- answering -------------------------------------------------------------------------

    async def resolve(self, request_id: str) -> PendingRow:
        return await self.hub.journal.run(Journal.resolve_question, request_id)

    async def answer(
        self, request_id: str, answer: dict[str, Any], by: str, kind: Kind | None = None
    ) -> QuestionJson:
        """Check an answer against the question and record it; the first answer wins."""
        row = await self.resolve(request_id)
        if kind is not None and row["kind"] != kind:
            other = "respond_to_sampling" if row["kind"] == SAMPLING else "respond_to_elicitation"
            raise UsageError(
                f"Request {row['request_id']} is a {row['kind']} request.", hint=f"Answer it with {other}."
            )
        status = check_answer(row, answer)
        settled = await self.settle(row["request_id"], status, answer=answer, by=by)
        now = await self.hub.journal.run(Journal.pending_row, row["request_id"])
        if not settled:
            raise already_answered(now or row)
        return question_json(now or row)

    async def settle(
        self,
        request_id: str,
        status: str,
        *,
        answer: dict[str, Any] | None = None,
        by: str | None = None,
        error: str | None = None,
    ) -> bool:
        if not await self.hub.journal.run(
            Journal.settle_pending, request_id, status, answer=answer, by=by, error=error
        ):
            return False
        await self._woken(request_id)
        return True

    async def _woken(self, request_id: str) -> None:
        question = self.live.get(request_id)
        row = await self.hub.journal.run(Journal.pending_row, request_id)
        if question is None or row is None or question.answered.is_set():
            return
        question.row = row
        question.answered.set()
        self.hub.events.emit(
            "pending_settled",
            row["server"],
            {"request_id": request_id, "status": row["status"], "answered_by": row.get("answered_by")},
        )

    async def withdraw(self, task_id: str, why: str) -> None:
        """Reject the open questions of a call that ended without them."""
        for question in [
            q for q in self.live.values() if q.row["task_id"] == task_id and not q.answered.is_set()
        ]:
            await self.settle(question.request_id, "rejected", error=why)

    # ---- housekeeping (the hub's watcher) --------------------------------------------------

    async def sync(self) -> None:
        """Pick up answers written by another process (the CLI)."""
        for request_id in list(self.live):
            row = await self.hub.journal.run(Journal.pending_row, request_id)
            if row is not None and row["status"] != "pending":
                await self._woken(request_id)

    async def expire_due(self) -> None:
        now = now_iso()
        for question in [
            q for q in self.live.values() if q.row["expires_at"] < now and not q.answered.is_set()
        ]:
            await self.settle(question.request_id, "expired", error="nobody answered in time")

    # ---- views -----------------------------------------------------------------------------

    def listed(
        self, kind: Kind | None = None, server: str | None = None, task_id: str | None = None
    ) -> list[QuestionJson]:
        """This process's open questions that wait on the client (not those the host is showing now)."""
        return [
            question_json(q.row)
            for q in self.live.values()
            if not q.answered.is_set()
            and not q.forwarding
            and (kind is None or q.row["kind"] == kind)
            and (server is None or q.row["server"] == server)
            and (task_id is None or q.row["task_id"] == task_id)
        ]

    def for_client(self) -> dict[str, Any]:
        elicitations, sampling = self.listed(ELICITATION), self.listed(SAMPLING)
        return (
            {"elicitations": elicitations, "sampling_requests": sampling} if elicitations or sampling else {}
        )


def _elicit_params(params: dict[str, Any]) -> types.ElicitRequestParams:
    if params.get("mode") == "url":
        return types.ElicitRequestURLParams.model_validate(params)
    return types.ElicitRequestFormParams.model_validate(params)


def check_answer(row: PendingRow, answer: dict[str, Any]) -> str:
    """The status this answer gives the question, or a UsageError naming what is wrong."""
    if row["status"] != "pending":
        raise already_answered(row)
    params = params_of(row)
    if row["kind"] == SAMPLING:
        try:
            types.CreateMessageResult.model_validate(answer)
        except ValueError as exc:
            raise UsageError(
                f"Not a valid sampling answer: {exc}", hint="Give the completion's text as `content`."
            ) from exc
        return SamplingStatus.COMPLETED.value
    action = answer.get("action")
    if action not in ACTION_STATUS:
        raise UsageError(f"action must be accept, decline or cancel (got {action!r}).")
    if action == "accept" and params.get("mode") != "url":
        wrong = schema.problems(
            answer.get("content") or {},
            params.get("requested_schema") or params.get("requestedSchema"),
            root="content",
        )
        if wrong:
            raise UsageError(
                "The answer does not match the question's schema:\n- " + "\n- ".join(wrong),
                hint="Fix the fields named and answer again; the question is still pending.",
            )
    try:
        types.ElicitResult.model_validate(answer)
    except ValueError as exc:
        raise UsageError(
            f"Not a valid elicitation answer: {exc}",
            hint="Values must be strings, numbers, booleans or lists of strings.",
        ) from exc
    return ACTION_STATUS[action].value


def already_answered(row: PendingRow) -> UsageError:
    who = f" by {row['answered_by']}" if row.get("answered_by") else ""
    return UsageError(
        f"Request {row['request_id']} was already {row['status']}{who}.", hint="Nothing was changed."
    )


def backend_reply(
    row: PendingRow, kind: Kind
) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
    """What the backend receives for a settled question."""
    if row["status"] in ("expired", "rejected"):
        code = types.REQUEST_TIMEOUT if row["status"] == "expired" else types.INTERNAL_ERROR
        return types.ErrorData(
            code=code, message=f"emceepee: the request was {row['status']}: {row.get('error') or ''}".strip()
        )
    answer = json.loads(row["answer"] or "null")
    return (
        types.ElicitResult.model_validate(answer)
        if kind == ELICITATION
        else types.CreateMessageResult.model_validate(answer)
    )
