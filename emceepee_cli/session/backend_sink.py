"""What backends say, passed on: `SessionSink` is the sink every backend reports to (backends/backend.py's
`BackendSink`).

A notification is kept for `get_notifications`, emitted as an event and relayed to the host's
own lists; a log line is kept for `get_logs` (and an MCP log relayed to the host); a spawned
process is journaled, so a later emceepee can stop it should this one die without doing so, and
what it starts is watched (backends/descendants.py); a
question (elicitation, sampling) is parked and maybe forwarded (questions/questions.py), labelled with
the call that asked when that is certain; a backend's changed status is logged, announced as an
event, and tells the host's tool list and native lists.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel

from emceepee_cli.backends import transport
from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.backends.descendants import Descendants
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.notifications import Heard, kept_params
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.questions import url_questions
from emceepee_cli.questions.answers import backend_reply
from emceepee_cli.questions.questions import Questions
from emceepee_cli.questions.sign_in import SignInQuestions
from emceepee_cli.redact import redact, redact_data
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.direct import Direct
from emceepee_cli.session.native_lists import Native
from emceepee_cli.session.roots import Roots
from emceepee_cli.shared import Shared
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import PendingRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostViews:
    """This host session's own views of the backends, apart from what `Shared` holds: its own
    lists, told what backends say (session/native_lists.py); the backend tools on its tools/list,
    told when they change (session/direct.py); and its roots, which a backend asks for
    (session/roots.py). None where there is none (a test without a host)."""

    native: Native | None = None
    direct: Direct | None = None
    roots: Roots | None = None


class SessionSink:
    def __init__(
        self,
        shared: Shared,
        heard: Heard,
        questions: Questions,
        tasks: Tasks,
        *,
        views: HostViews,
        descendants: Descendants | None = None,
        launch: Launch | None = None,
    ) -> None:
        self.journal = shared.journal
        self.events = shared.events
        self.runtime = shared.runtime
        self.instance_id = shared.instance_id
        self.heard = heard
        self.questions = questions
        self.tasks = tasks
        self.native = views.native  # the host's own lists, told what backends say
        self.roots = views.roots
        self.direct = views.direct  # backend tools on the host's own tools/list
        self.book = ProcessBook(shared.journal, shared.runtime, shared.instance_id, descendants)
        # a remote backend's sign-in (questions/sign_in.py): in the fleet, the host's browser opens
        environ = None if launch is None else launch.environ
        self.sign_in = SignInQuestions(questions, shared.events, environ=environ)

    def __repr__(self) -> str:
        return f"<SessionSink {self.instance_id}>"

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        """Kept for get_notifications and emitted as an event; a repeat is counted, not kept again."""
        params, encoded = kept_params(redact_data(params))
        self.heard.notification(server, method, params)
        key = f"{server}\0{method}\0{encoded}"
        self.events.emit("notification", server, {"method": method, "params": params}, coalesce=key)
        if self.native is not None:
            self.native.relay(server, method, params)
        if method == "notifications/elicitation/complete" and isinstance(params.get("elicitationId"), str):
            self.runtime.spawn(
                url_questions.completed,
                self.questions,
                server,
                params["elicitationId"],
                name="elicitation complete",
            )

    def log(self, server: str, level: str, message: str, source: str) -> None:
        self.heard.log(server, level, message, source)
        if source == "mcp" and self.native is not None:
            self.native.relay_log(server, level, redact(message))

    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None:
        self.book.spawned(backend.name, process)

    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None:
        self.book.ended(process)

    async def question(
        self,
        backend: Backend,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
        forward_why_not: str | None = None,
        shared_askers: frozenset[str] = frozenset(),
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
        answered = await self._ask(backend, kind, params, forward_why_not, shared_askers)
        return answered if isinstance(answered, types.ErrorData) else backend_reply(answered)

    def could_ask(self, backend: Backend) -> bool:
        """Whether a call or held request of this session is in flight on `backend` (a question it
        asks now can be this host's)."""
        held = self.native.rounds.asking(backend.name) if self.native is not None else []
        return bool(held or self.tasks.askers.could_ask(backend.name, sole=False))

    async def _ask(
        self,
        backend: Backend,
        kind: str,
        params: BaseModel,
        forward_why_not: str | None,
        shared_askers: frozenset[str] = frozenset(),
    ) -> PendingRow | types.ErrorData:
        """A handshake-era backend asks mid-call: park (and maybe forward) it; its settled row.

        The question is labelled with the call that asked only when no other call can have asked
        it (calls/askers.py's `Askers.could_ask`); else it keeps the calls that can have. It is tied
        to a host's held request instead when that is the only request in flight there.
        `forward_why_not`: the fleet's backend, shared by several hosts, cannot say whose it is
        (session/pool.py): it is parked, never forwarded, tied to no call, and labelled with the
        calls of every host that can have asked it (`shared_askers`)."""
        could_ask = self.tasks.askers.could_ask(backend.name)
        task_id, correlation = (next(iter(could_ask)), "sole") if len(could_ask) == 1 else (None, "server")
        held = self.native.rounds.asking(backend.name) if self.native is not None else []
        if forward_why_not is not None:
            task_id, correlation, could_ask, held = None, "server", shared_askers, []
        elif held:  # a host's prompts/get or resources/read waits there too (session/native_rounds.py)
            alone = len(held) == 1 and not self.tasks.calls.on(backend.name)
            task_id, correlation = None, "sole" if alone else "server"
            could_ask = frozenset() if alone else self.tasks.askers.could_ask(backend.name, sole=False)
        dumped = params.model_dump(mode="json", exclude_none=True)
        try:
            question = await self.questions.ask(
                backend.name,
                kind,
                dumped,
                task_id=task_id,
                correlation=correlation,
                could_ask=could_ask,
                forward_why_not=forward_why_not,
            )
        except EmceepeeError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=exc.message)
        if held and correlation == "sole":
            held[0].tie(question)
        return await self.questions.wait(question)

    async def roots_of(self, backend: Backend) -> types.ListRootsResult:
        return (
            types.ListRootsResult(roots=[])
            if self.roots is None
            else await self.roots.for_backend(backend.spec)
        )

    def relisted(self, backend: Backend, listed: str) -> None:
        if self.direct is not None:
            self.direct.changed()
        if self.native is not None:
            self.native.relisted(listed)

    def status_changed(self, backend: Backend, previous: Status) -> None:
        if self.direct is not None:
            self.direct.changed()
        if backend.last_error:  # e.g. a missing `cwd`, quoted as expanded: show its ${VAR} form
            backend.last_error = redact(backend.last_error)
        detail = f": {backend.last_error}" if backend.last_error and backend.status != Status.READY else ""
        self.log(backend.name, "info", f"{previous} -> {backend.status}{detail}", "emceepee")
        if detail:  # the host's log of our stderr is often the only place a person looks
            log.warning("backend %s: %s -> %s%s", backend.name, previous, backend.status, detail)
        if backend.status == Status.READY and self.native is not None:
            self.native.connected(backend)
        kind = _SERVER_EVENTS.get((previous, backend.status)) or _SERVER_EVENTS.get((None, backend.status))
        if kind:
            data = {
                "status": backend.status.value,
                **({"error": backend.last_error} if backend.last_error else {}),
            }
            self.events.emit(kind, backend.name, data)


class ProcessBook:
    """The processes backends spawn: journaled under an instance that lives as long as they do (the
    serve; the fleet, for its pooled backends), so a later emceepee can stop them should it die
    without doing so; and what they start, watched (backends/descendants.py)."""

    def __init__(
        self, journal: AsyncJournal, runtime: Runtime, instance_id: str, descendants: Descendants | None
    ) -> None:
        self.journal = journal
        self.runtime = runtime
        self.instance_id = instance_id
        self.descendants = descendants

    def __repr__(self) -> str:
        return f"<ProcessBook {self.instance_id}>"

    def spawned(self, server: str, process: transport.ProcessInfo) -> None:
        if self.descendants is not None:
            self.descendants.watch(server, process)
        if process.start_time is not None:
            start = process.start_time
            spawned = self.journal.sync.spawned
            self.runtime.write(self.journal, spawned.add, self.instance_id, server, process.pid, start)

    def ended(self, process: transport.ProcessInfo) -> None:
        if self.descendants is not None:
            self.descendants.unwatch(process)
        if process.returncode is not None:
            self.runtime.write(self.journal, self.journal.sync.spawned.forget, self.instance_id, process.pid)


_SERVER_EVENTS: dict[tuple[Status | None, Status], str] = {
    (Status.STARTING, Status.READY): "server_connected",
    (Status.RESTARTING, Status.READY): "server_restarted",
    (Status.READY, Status.RESTARTING): "server_disconnected",
    (None, Status.FAILED): "server_failed",
}
