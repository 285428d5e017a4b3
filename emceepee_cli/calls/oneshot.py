"""Backends started for one terminal command (`tools`, `call`, `doctor`): no serve, no host, no journal.

Each backend is the same `Backend` that `serve` supervises, started the same way (the same
environment rules, handshake and listing), and stopped when the command ends. Its stderr goes to
its log file as under `serve` (`command_logs`), each start marked with the command that made it,
so `emceepee logs NAME` shows why a `call` failed; nothing goes to the journal. A question the
backend asks goes to `ask` (the terminal, for `call`); a 2026-07-28 backend's input rounds are
answered the same way. A remote backend whose server asks for a sign-in asks `sign_in` (the
terminal, for `call`: the command then waits for the person, up to `SIGNIN_WINDOW_S`; `doctor`'s
nobody, for which it fails saying what to run).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli.backends import listing, transport
from emceepee_cli.backends.backend import Backend, BackendSink, Status, configured_roots, leaves
from emceepee_cli.backends.logfile import LogFolder
from emceepee_cli.calls import admission, input_rounds, policy
from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.errors import BackendError
from emceepee_cli.signin.flow import SIGNIN_WINDOW_S, Nobody, Person

READY_WAIT_S = 30.0  # first runs of `uvx`/`npx` download packages before answering
KEPT_LINES = 50  # of each backend's stderr and log messages

# (server, "elicitation" | "sampling", the request's params) -> the answer's JSON, or None to refuse.
Ask = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


async def refuse(server: str, kind: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """For a command with nobody to ask: a form is declined, a sampling request refused."""
    return {"action": "decline"} if kind == "elicitation" else None


class Sink:
    """What the backends report, kept for the command (a `BackendSink`)."""

    def __init__(self, ask: Ask, sign_in: Person | None = None) -> None:
        self.ask = ask
        self.sign_in: Person = sign_in or Nobody()  # who signs in to a remote backend's server
        self.heard: dict[str, deque[str]] = {}

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        pass  # list changes are followed by the backend itself; nobody waits for events here

    def log(self, server: str, level: str, message: str, source: str) -> None:
        self.heard.setdefault(server, deque(maxlen=KEPT_LINES)).append(
            message if source == "stderr" else f"[{level}] {message}"
        )

    def status_changed(self, backend: Backend, previous: Status) -> None:
        pass

    async def question(
        self,
        backend: Backend,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
        return reply(
            kind, await self.ask(backend.name, kind, params.model_dump(mode="json", exclude_none=True))
        )

    async def roots_of(self, backend: Backend) -> types.ListRootsResult:
        """A command has no host: the server's own roots from the config, if it has any."""
        return types.ListRootsResult(roots=configured_roots(backend.spec.roots))

    def relisted(self, backend: Backend, listed: str) -> None:
        pass

    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None:
        pass

    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None:
        pass


def reply(
    kind: str, answer: dict[str, Any] | None
) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
    if answer is None:
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"emceepee: the {kind} request was refused")
    if kind == "elicitation":
        return types.ElicitResult.model_validate(answer)
    return types.CreateMessageResult.model_validate(answer)


def command_logs(command: str, defaults: Defaults) -> LogFolder | None:
    """Where the backends a terminal command (`emceepee call`…) starts write their stderr: the
    folder `serve` writes to; None (stderr in memory only) when it cannot be made."""
    from emceepee_cli import paths

    try:
        folder = paths.ensure_private_dir(paths.logs_dir())
    except OSError:
        return None
    return LogFolder(folder, defaults.log_backups, command)


@asynccontextmanager
async def started(
    specs: Iterable[ServerSpec],
    ask: Ask = refuse,
    wait_s: float = READY_WAIT_S,
    logs: LogFolder | None = None,
    sign_in: Person | None = None,
) -> AsyncIterator[dict[str, Backend]]:
    """The backends of `specs`, started together (their stderr logged in `logs`, if given);
    yielded once each is ready or has failed to start (or `wait_s` ran out; a backend whose
    person is signing in is waited for until the sign-in ends); stopped, and everything they
    started with them, on the way out."""
    quiet_sign_in_log()
    sink = Sink(ask, sign_in)
    backends = {spec.name: Backend(spec, sink, logs) for spec in specs}
    try:
        async with anyio.create_task_group() as tg:
            for backend in backends.values():
                tg.start_soon(backend.run, name=f"backend {backend.name}")
            try:
                with anyio.move_on_after(wait_s):
                    async with anyio.create_task_group() as waits:
                        for backend in backends.values():
                            waits.start_soon(backend.wait_ready, wait_s)
                async with anyio.create_task_group() as waits:
                    for backend in backends.values():
                        if backend.sign_in.prompt is not None:
                            waits.start_soon(signed_in, backend, wait_s)
                yield backends
            finally:
                for backend in backends.values():
                    backend.stop()
    except BaseExceptionGroup as group:  # the command's own error, not wrapped by the task group
        found = [e for e in leaves(group) if not isinstance(e, anyio.get_cancelled_exc_class())]
        raise (found[0] if len(found) == 1 else group) from None


def quiet_sign_in_log() -> None:
    """The SDK's sign-in logs a failed sign-in with its traceback; a command says it as an error of
    its own, so the log is not printed (a command configures no logging, and Python would print
    a record nobody handles on stderr). Under serve, whose handlers log it, nothing changes."""
    sdk = logging.getLogger("mcp.client.auth")
    if not any(isinstance(handler, logging.NullHandler) for handler in sdk.handlers):
        sdk.addHandler(logging.NullHandler())


async def signed_in(backend: Backend, wait_s: float) -> None:
    """Wait while `backend`'s person is signing in (bounded by the sign-in's own window), then for
    its start to end as `started` waits for any backend's."""
    await backend.wait_for(lambda _: backend.sign_in.prompt is None, SIGNIN_WINDOW_S)
    await backend.wait_ready(wait_s)


_: type[BackendSink] = Sink  # checked by mypy: a Sink is what a Backend reports to


def heard(backend: Backend) -> list[str]:
    sink = backend.sink
    return list(sink.heard.get(backend.name, ())) if isinstance(sink, Sink) else []


def tool_listing(backends: Iterable[Backend], pattern: str | None) -> dict[str, Any]:
    """What `list_tools` returns, for these backends: {"servers": [{server, status, tools | error}]}."""
    from emceepee_cli import patterns

    groups: list[dict[str, Any]] = []
    for backend in backends:
        group: dict[str, Any] = {"server": backend.name, "status": backend.status.value}
        if backend.status != Status.READY:
            group["error"] = backend.last_error or f"backend is {backend.status}"
            if backend.refusal is not None and backend.refusal.hint:  # what to set, or run to sign in
                group["hint"] = backend.refusal.hint
        else:
            group["tools"] = [  # as the list_tools meta-tool shows them, denied tools hidden
                listing.tool_json(t)
                for t in backend.offer.tools.values()
                if policy.visible(backend.spec, t.name)
            ]
        groups.append(group)
    if pattern:
        listed = [tool for group in groups for tool in group.get("tools", ())]
        found = patterns.matching(pattern, [(t["name"], t["description"]) for t in listed])
        kept = {id(tool) for tool, hit in zip(listed, found, strict=True) if hit}
        for group in groups:
            if "tools" in group:
                group["tools"] = [tool for tool in group["tools"] if id(tool) in kept]
    return {"servers": groups}


async def admit(backend: Backend, tool: str, args: admission.Arguments) -> dict[str, Any]:
    """The call's arguments, once the admission rule (calls/admission.py) lets it be sent; a refusal
    says where to see the schema from a terminal. A tool the config denies is refused here too (the
    person at the terminal approves any other by running the command)."""
    verdict = await admission.admit(backend, tool, args)
    if not isinstance(verdict, admission.Admitted):
        schema = f"emceepee tools {backend.name} --pattern '^{tool}$' --json"
        raise admission.refused(verdict, schema_hint=f"Nothing was sent. See the schema with: {schema}")
    return verdict.args


async def call(
    backend: Backend, tool: str, args: dict[str, Any], ask: Ask, progress: Progress
) -> types.CallToolResult:
    """Call the tool; answer a 2026-07-28 backend's input rounds with `ask` until it returns a result
    (calls/input_rounds.py)."""

    async def send(responses: types.InputResponses | None, state: str | None) -> input_rounds.Reply:
        async def request(session: Any) -> Any:
            return await session.call_tool(
                tool,
                args,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )

        result = await backend.request(f"tools/call '{tool}'", request)
        if not isinstance(result, types.CallToolResult | types.InputRequiredResult):
            raise BackendError(
                f"Backend '{backend.name}' answered tools/call '{tool}' with an unknown result type."
            )
        return result, None

    async def answer(requests: types.InputRequests, state: str | None, number: int) -> types.InputResponses:
        return await _answers(backend.name, requests, ask)

    result, _ = await input_rounds.until_result(send, answer)
    return result


async def _answers(server: str, requests: dict[str, Any], ask: Ask) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for key, request in requests.items():
        if isinstance(request, types.ElicitRequest):
            kind = "elicitation"
        elif isinstance(request, types.CreateMessageRequest):
            kind = "sampling"
        else:  # roots: an ad hoc call exposes none
            answers[key] = types.ListRootsResult(roots=[])
            continue
        answer = reply(
            kind, await ask(server, kind, request.params.model_dump(mode="json", exclude_none=True))
        )
        if isinstance(answer, types.ErrorData):
            raise BackendError(
                f"Backend '{server}' asked a {kind} question that was refused; the call was given up."
            )
        answers[key] = answer
    return answers
