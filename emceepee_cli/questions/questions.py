"""Questions from backends — elicitation (ask the user) and sampling (ask an LLM).

Lifecycle of one question: a backend asks (a handshake-era request to our callback, or one of
the `inputRequests` of a 2026-07-28 `InputRequiredResult`) → it is journaled as `pending` and
announced as an event → it is forwarded to the host when the host can answer and the policy
allows, and in any case parked, so that whoever answers first wins: the host's own form, the
model through `respond_to_*` / `resume_tool`, or a person with `emceepee answer` (the CLI writes
the journal; the owning `serve` notices within `watcher.WATCH_INTERVAL_S`). Every answer is
checked (an elicitation's content against its `requested_schema`) before it is accepted. A
question nobody answers expires; one the backend withdraws, or whose backend dies, is rejected.

Whoever waits on a call hears that a question now waits on the client through the listeners
given to `on_waiting` (the tasks register one at wiring): this module knows nothing of calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types

from emceepee_cli.clock import now_iso
from emceepee_cli.config import Policy
from emceepee_cli.errors import BackendError, EmceepeeError
from emceepee_cli.ids import new_id
from emceepee_cli.questions.answers import answer_question
from emceepee_cli.questions.host_link import HostLink, undeclared
from emceepee_cli.questions.newest import newest
from emceepee_cli.questions.reminders import reminder
from emceepee_cli.shared import Shared
from emceepee_cli.store.records import Kind, PendingRow, QuestionJson, approval_of, params_of, question_json
from emceepee_cli.store.unreadable import readable

logger = logging.getLogger(__name__)

PolicyFn = Callable[[str, str], Policy]  # (server, kind) -> auto | forward | park
Waiting = Callable[[str, str | None], None]  # (server, task_id): a question now waits on the client
LISTING = {  # the tool that lists each of a reply's lists of questions whole
    "elicitations": "get_elicitations",
    "sampling_requests": "get_sampling_requests",
    "elicitations_for_server": "get_elicitations",
    "sampling_requests_for_server": "get_sampling_requests",
}


class LogSink(Protocol):
    """Where a question's trouble is logged for get_logs (as a backend's own logs are)."""

    def __call__(self, server: str, level: str, message: str, source: str) -> None: ...


@dataclass(eq=False)
class Question:
    """A question this process is holding for a backend."""

    row: PendingRow
    answered: anyio.Event = field(default_factory=anyio.Event)
    forwarding: bool = False
    shown: bool = False  # a reply has carried it whole: later ones carry a reminder (questions/reminders.py)
    blocks_call: bool = True  # False: no call waits on it (a URL the backend needs opened first)
    could_ask: frozenset[str] = frozenset()  # tied to no call: the calls that can have asked it

    def __repr__(self) -> str:
        return f"<Question {self.request_id} {self.row['kind']} {self.row['server']} {self.row['status']}>"

    @property
    def request_id(self) -> str:
        return self.row["request_id"]


class Questions:
    def __init__(self, shared: Shared, *, policy: PolicyFn, host: HostLink, log: LogSink) -> None:
        self.journal = shared.journal
        self.events = shared.events
        self.runtime = shared.runtime
        self.defaults = shared.defaults
        self.instance_id = shared.instance_id
        self.policy = policy
        self.host = host
        self.log = log
        self.live: dict[str, Question] = {}
        self._waiting: list[Waiting] = []

    def __repr__(self) -> str:
        return f"<Questions live={len(self.live)}>"

    def on_waiting(self, listener: Waiting) -> None:
        """Call `listener(server, task_id)` whenever a question starts waiting on the client."""
        self._waiting.append(listener)

    # ---- asking ------------------------------------------------------------------------------

    async def ask(
        self,
        server: str,
        kind: str,
        params: dict[str, Any],
        *,
        task_id: str | None,
        correlation: str,
        input_key: str | None = None,
        round_: int = 0,
        blocks_call: bool = True,
        purpose: str | None = None,
        approval: dict[str, Any] | None = None,
        could_ask: frozenset[str] = frozenset(),
        announce: bool = True,
        forward_why_not: str | None = None,
    ) -> Question:
        """Journal a backend's question, then forward it to the host or park it; `announce=False`
        leaves telling the waiters to the caller (`announce`), who asks several at once;
        `forward_why_not`: parked whatever the host could do, for this reason."""
        row = self._row(server, kind, params, task_id, correlation, input_key, round_)
        question = Question(row, blocks_call=blocks_call, could_ask=could_ask)
        if purpose is not None:  # emceepee's own question (an approval): what it is about, beside it
            question.row["purpose"], question.row["approval"] = purpose, json.dumps(approval)
        try:
            with anyio.CancelScope(shield=True):
                await self.journal.run(self.journal.sync.pending.insert, question.row)
        except EmceepeeError as exc:
            # Unjournaled, nobody could answer it from a terminal or after a restart: refuse it
            # now (the backend hears why) rather than list a question that cannot be settled.
            why = f"emceepee could not record it ({exc.message})"
            self.log(server, "error", f"{kind} request refused: {why}", "emceepee")
            self.events.emit("pending_refused", server, {"kind": kind, "task_id": task_id, "error": why})
            raise BackendError(
                f"Backend '{server}' asked a {kind} question that was refused: {why}."
            ) from exc
        self.live[question.request_id] = question
        self.events.emit(
            "pending_request",
            server,
            {"request_id": question.request_id, "kind": kind, "task_id": task_id, "correlation": correlation},
        )
        if self._should_forward(server, kind, params, approval, forward_why_not):
            question.forwarding = True
            self.runtime.spawn(self._forward, question, name=f"forward {question.request_id}")
        elif blocks_call and announce:
            self._announce(server, task_id)
        return question

    def _row(
        self,
        server: str,
        kind: str,
        params: dict[str, Any],
        task_id: str | None,
        correlation: str,
        input_key: str | None,
        round_: int,
    ) -> PendingRow:
        return PendingRow(
            request_id=new_id(),
            instance_id=self.instance_id,
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
            expires_at=now_iso(self.defaults.pending_timeout_ms / 1000),
            answered_at=None,
            answered_by=None,
            answer=None,
            error=None,
        )

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
                    await self.runtime.guarded(lambda: self._withdrawn(question))
                self.live.pop(question.request_id, None)
        return question.row

    async def _withdrawn(self, question: Question) -> None:
        await self.settle(
            question.request_id, "rejected", error="the backend withdrew the request, or stopped"
        )

    def announce(self, server: str, task_id: str | None) -> None:
        """Tell whoever waits on the call(s) that questions of theirs now wait on the client."""
        self._announce(server, task_id)

    def _announce(self, server: str, task_id: str | None) -> None:
        for listener in self._waiting:
            listener(server, task_id)

    # ---- forwarding to the host ---------------------------------------------------------------

    def _should_forward(
        self,
        server: str,
        kind: str,
        params: dict[str, Any],
        approval: dict[str, Any] | None = None,
        why: str | None = None,
    ) -> bool:
        why = why or self.host.why_not(self.policy(server, kind), kind, params)
        if why is None and not _host_may_accept(approval):
            why = "approval_by does not name the host"
        if why is not None:
            self.log(server, "info", f"{kind} request not forwarded to the host: {why}; parked", "emceepee")
            logger.info("backend %s: %s request not forwarded to the host: %s; parked", server, kind, why)
        return why is None

    def why_not_in_round(self, row: PendingRow, caps: types.ClientCapabilities) -> str | None:
        """Why this question cannot go back to a 2026-07-28 host in its call's input round, whose
        request declared `caps`; None when it can. The same rules as forwarding, except that
        `forward` cannot overrule what the request declared: its client would fail the whole call."""
        kind = row["kind"]
        if self.policy(row["server"], kind) == "park":
            return f"the {kind} policy is 'park'"
        why = undeclared(caps, kind, params_of(row))
        if why is None and not _host_may_accept(approval_of(row) or None):
            why = "approval_by does not name the host"
        return why

    async def _forward(self, question: Question) -> None:
        row = question.row
        try:
            with anyio.fail_after(self.defaults.pending_timeout_ms / 1000):
                answer = await self.host.forward(row["kind"], params_of(row))
            await self.answer(question.request_id, answer, by="host")
        except EmceepeeError as exc:  # the host's answer was invalid, or someone answered first
            self._host_answer_refused(question, exc)
        except Exception as exc:  # noqa: BLE001 - forwarding is best effort: park instead
            message = f"forwarding {question.request_id} to the host failed ({exc!r}); parked"
            self.log(row["server"], "warning", message, "emceepee")
            logger.warning("backend %s: %s", row["server"], message)
        finally:
            question.forwarding = False
            if not question.answered.is_set() and question.blocks_call:
                self._announce(row["server"], row["task_id"])

    def _host_answer_refused(self, question: Question, exc: EmceepeeError) -> None:
        """The person who filled the host's form must not be ignored silently: the model hears why."""
        row = question.row
        message = f"the host's answer to {question.request_id} was not used: {exc.message}"
        self.log(row["server"], "warning", message, "emceepee")
        logger.warning("backend %s: %s", row["server"], message)
        if question.answered.is_set():
            return  # someone else answered first: nothing is waiting
        self.events.emit(
            "host_answer_refused",
            row["server"],
            {
                "request_id": question.request_id,
                "kind": row["kind"],
                "task_id": row["task_id"],
                "error": exc.message,
                "hint": "The question is still pending: answer it with respond_to_elicitation / "
                "respond_to_sampling (or resume_tool), or ask the user again.",
            },
        )

    # ---- answering -------------------------------------------------------------------------

    async def resolve(self, request_id: str) -> PendingRow:
        return await self.journal.run(self.journal.sync.pending.resolve, request_id)

    async def answer(
        self, request_id: str, answer: dict[str, Any], by: str, kind: str | None = None
    ) -> QuestionJson:
        """Check an answer against the question and record it; the first answer wins."""
        row = await self.journal.run(answer_question, self.journal.sync, request_id, answer, by, kind)
        await self._woken(row["request_id"])
        return question_json(row)

    async def settle(
        self,
        request_id: str,
        status: str,
        *,
        answer: dict[str, Any] | None = None,
        by: str | None = None,
        error: str | None = None,
    ) -> bool:
        if not await self.journal.run(
            self.journal.sync.pending.settle, request_id, status, answer=answer, by=by, error=error
        ):
            return False
        await self._woken(request_id)
        return True

    async def _woken(self, request_id: str) -> None:
        question = self.live.get(request_id)
        row = await self.journal.run(self.journal.sync.pending.row, request_id)
        if question is None or row is None or question.answered.is_set():
            return
        question.row = row
        question.answered.set()
        self.events.emit(
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

    # ---- housekeeping (the watcher) --------------------------------------------------------

    async def sync(self) -> None:
        """Pick up answers written by another process (the CLI)."""
        for request_id in list(self.live):
            row = await self.journal.run(self.journal.sync.pending.row, request_id)
            if row is not None and row["status"] != "pending":
                await self._woken(request_id)

    async def expire_due(self) -> None:
        now = now_iso()
        for question in [
            q for q in self.live.values() if q.row["expires_at"] < now and not q.answered.is_set()
        ]:
            await self.settle(question.request_id, "expired", error="nobody answered in time")

    def unanswered(self) -> list[str]:
        """The ids of the questions this process holds that are still open."""
        return [q.request_id for q in self.live.values() if not q.answered.is_set()]

    # ---- views -----------------------------------------------------------------------------

    def listed(
        self, kind: str | None = None, server: str | None = None, task_id: str | None = None
    ) -> list[QuestionJson]:
        """This process's open questions that wait on the client (not those the host is showing now);
        one whose row does not decode is left out (logged once), as every reply carries this list."""
        rows = [
            q.row
            for q in self.live.values()
            if not q.answered.is_set()
            and not q.forwarding
            and (kind is None or q.row["kind"] == kind)
            and (server is None or q.row["server"] == server)
            and (task_id is None or q.row["task_id"] == task_id)
        ]
        return readable(rows, question_json)

    def for_client(self) -> dict[str, Any]:
        """Category 4: questions from backends awaiting an answer (empty when there are none), the
        newest few of each kind (questions/newest.py), each whole the first time a reply carries it and
        a reminder after."""
        lists = {
            "elicitations": self.listed(Kind.ELICITATION),
            "sampling_requests": self.listed(Kind.SAMPLING),
        }
        if not any(lists.values()):
            return {}
        kept, extra = newest(lists, {key: f"{LISTING[key]}()" for key in lists})
        return {key: self._once(items) for key, items in kept.items()} | extra

    def for_server(self, server: str) -> dict[str, Any]:
        """The questions of one server awaiting an answer, as `for_client` shows them."""
        lists = {
            "elicitations_for_server": self.listed(Kind.ELICITATION, server),
            "sampling_requests_for_server": self.listed(Kind.SAMPLING, server),
        }
        kept, extra = newest(lists, {key: f"{LISTING[key]}(server='{server}')" for key in lists})
        return {key: self._once(items) for key, items in kept.items()} | extra

    def shown(self, request_ids: Iterable[str]) -> None:
        """These questions were just shown whole (as a saga's steps): the rest of a reply reminds."""
        for request_id in request_ids:
            if (question := self.live.get(request_id)) is not None:
                question.shown = True

    def _once(self, questions: list[QuestionJson]) -> list[Any]:
        out = []
        for question in questions:
            live = self.live[question["request_id"]]
            out.append(reminder(question) if live.shown else question)
            live.shown = True
        return out


def _host_may_accept(approval: dict[str, Any] | None) -> bool:
    """The host may be asked this question: it is no approval, or one its `approval_by` lets the
    host accept."""
    return approval is None or "host" in approval.get("by", ("host",))
