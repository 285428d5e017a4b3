"""One backend MCP server: its supervised connection, what it offers, and requests to it.

Lifecycle of `Backend.run` (one long-lived task per backend, which enters and exits the
transport and the session itself, as anyio requires):

    starting ─► ready ─► (process exits / connection lost) ─► restarting ─► ready …
        │                                                      └─► failed (too many restarts)
        └─► failed (command not found, handshake failed or timed out too often)
    any state ─► stopped (emceepee shuts down, or the server was removed)

`stop()` cancels whatever the backend is doing, a handshake included; the transport's own stop
still runs, shielded and bounded. A call in flight when the backend dies fails at once with the
exit status and stderr tail, and so does a call that waits for a backend whose start just failed
(it is not made to wait out the restart backoff). "At once" is once the transport has stopped the
process and read its stderr (`ProcessInfo.settled`), whichever of its exit and its last stderr
lines came first; and a call on its way to the backend when it died (dispatched while it was
ready, its request not yet sent) fails with that death too, not with the restart that follows.
A call cut off because emceepee stopped the backend on purpose (`stop(why)`: a config change
restarts it, it was removed) or closed its connection (a line it could not read) is told that
instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.session import ClientRequestContext

from emceepee_cli import __version__
from emceepee_cli.backends import connect, listing, transport
from emceepee_cli.backends.dispatcher import BackendDispatcher
from emceepee_cli.backends.failures import (
    Answered,
    Refused,
    answered_with_error,
    backend_answered,
    brief,
    closed,
    closest,
    describe,
    leaves,
)
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.config import ServerSpec, root_uris
from emceepee_cli.errors import BackendError, BackendUnavailable, EmceepeeError, NotFound
from emceepee_cli.questions import url_questions
from emceepee_cli.store.records import Kind

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT_S = 60.0  # first runs of `uvx`/`npx` download packages before answering
LIST_TIMEOUT_S = 30.0
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # one entry per attempt; then the backend is failed
STABLE_AFTER_S = 60.0  # ready this long, and the next crash starts the backoff afresh
# A call failed by its backend's death waits for the transport to stop the process and read its
# stderr (`ProcessInfo.settled`), so that its error has the exit status and the last stderr lines,
# whatever order they arrive in; that stop and drain are bounded, and so is this wait.
DEATH_REPORT_WAIT_S = transport.STOP_BOUND_S + transport.STDERR_DRAIN_S + 1.0
DEATH_TAIL_LINES = 10  # of stderr, in an error that reports a backend's exit
DEATH_TAIL_CHARS = 2000

T = TypeVar("T")
R = TypeVar("R", types.ElicitResult, types.CreateMessageResult)

__all__ = ["WAITING", "Backend", "BackendSink", "Status", "brief", "describe", "first_of", "leaves"]


class Status(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    RESTARTING = "restarting"
    STOPPED = "stopped"
    DISABLED = "disabled"


WAITING = (Status.STARTING, Status.RESTARTING)


@dataclass(frozen=True)
class StopReason:
    """Why emceepee stopped a backend on purpose, as the calls it cuts off are told."""

    said: str  # completes "Backend 'x' was …", e.g. "restarted because its config table changed"
    hint: str


class BackendSink(Protocol):
    """Where a backend reports what it hears (session/backend_sink.py implements it)."""

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None: ...
    def log(self, server: str, level: str, message: str, source: str) -> None: ...
    def status_changed(self, backend: Backend, previous: Status) -> None: ...
    async def question(
        self,
        backend: Backend,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData: ...
    async def roots_of(self, backend: Backend) -> types.ListRootsResult: ...
    def relisted(self, backend: Backend, listed: str) -> None: ...  # "tools", "resources" or "prompts"
    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None: ...
    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None: ...


class Backend:
    def __init__(
        self,
        spec: ServerSpec,
        sink: BackendSink,
        log_dir: Path | None = None,
        starts: StartSlots | None = None,
    ) -> None:
        self.spec = spec
        self.sink = sink
        self.starts = starts  # how many backends boot at once (backends/start_limit.py); None: no limit
        self._wanted = anyio.Event()  # someone waits for it to start: it does not queue for a slot
        self.log_path = log_dir / f"{spec.name}.log" if log_dir else None
        self.status = Status.STARTING if spec.enabled else Status.DISABLED
        self.last_error: str | None = None
        self.restarts = 0
        self.offer = listing.Offer()
        self.session: ClientSession | None = None
        self.dispatcher: BackendDispatcher | None = None  # for the requests the session cannot type
        self.process: transport.ProcessInfo | None = None
        self._changed = anyio.Event()
        self._stop = anyio.Event()
        self.stopped_for: StopReason | None = None
        self._scope = anyio.CancelScope()  # stop() cancels it: nothing the backend does outlasts a stop
        self._lost = anyio.Event()
        self._died: transport.ProcessInfo | None = None  # its ready connection ended, none is since
        self._start_failed = False  # the last attempt ended before ready: callers are told, not kept waiting
        self._handshaking: anyio.CancelScope | None = None
        self._garbled: str | None = None
        self._refreshes: listing.Refreshes | None = None

    def __repr__(self) -> str:
        pid = f" pid={self.pid}" if self.pid else ""
        return (
            f"<Backend {self.name} {self.status}{pid} restarts={self.restarts} tools={len(self.offer.tools)}>"
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.status == Status.READY else None

    # ---- supervision -------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the backend connected until `stop()`; restart it with backoff when it dies."""
        if not self.spec.enabled:
            return
        with self._scope:
            await self._supervise()
        if self._stop.is_set():
            self._set_status(Status.STOPPED)

    async def _supervise(self) -> None:
        """Connect, and reconnect with backoff; returns only once the backend has failed for good."""
        failures = 0
        while True:
            ready_at: list[float] = []
            try:
                await self._connect_and_serve(ready_at)
            except Exception as exc:  # noqa: BLE001 - every failure is reported, none escapes
                self.last_error = self._failure(exc, was_ready=bool(ready_at))
                self._start_failed = not ready_at
                if any(isinstance(e, EmceepeeError) for e in leaves(exc)):
                    failures = len(RESTART_BACKOFF_S)  # a missing command or bad cwd stays wrong
            if ready_at and anyio.current_time() - ready_at[0] > STABLE_AFTER_S:
                failures = 0
            if failures >= len(RESTART_BACKOFF_S):
                self._set_status(Status.FAILED)
                return
            self._set_status(Status.RESTARTING)
            await anyio.sleep(RESTART_BACKOFF_S[failures])
            failures += 1
            self.restarts += 1

    def stop(self, why: StopReason | None = None) -> None:
        """Stop for good; `why` is what the calls it cuts off are told (none: emceepee is stopping,
        and calls/runner.py says so)."""
        if why is not None and not self._stop.is_set():
            self.stopped_for = why
        self._stop.set()
        self._scope.cancel()

    def _failure(self, exc: Exception, was_ready: bool) -> str:
        """last_error for a connection that ended with `exc`."""
        info = self.process
        if info is not None and info.returncode is not None and info.stopped_with is None:
            return f"exited{'' if was_ready else ' during start-up'} ({_death_report(info)})"
        text = describe(exc)
        if info is not None and (self._lost.is_set() or closed(exc)):
            text += f"; {_death_report(info)}"
        return text

    def _mark_lost(self) -> None:
        """The connection is gone: new calls wait for the restart instead of finding no session."""
        self._lost.set()
        if self.status == Status.READY and not self._stop.is_set():
            self._died = self.process
            self._set_status(Status.RESTARTING)

    async def wait_for(self, done: Callable[[Status], bool], timeout_s: float, want: bool = False) -> None:
        """Wait (bounded) until the status satisfies `done`. `want`: the waiter needs this backend
        itself, so its start does not queue behind the others (backends/start_limit.py)."""
        if done(self.status):
            return  # the common case, on every call: no cancel scope needed
        if want:
            self._wanted.set()
        with anyio.move_on_after(timeout_s):
            while not done(self.status):
                await self._changed.wait()

    @property
    def starting(self) -> bool:
        """Starting or restarting, and its last start did not fail: worth waiting for."""
        return self.status in WAITING and not self._start_failed

    async def wait_ready(self, timeout_s: float, want: bool = True) -> None:
        """Wait (bounded) while the backend is starting or restarting, unless its last start failed.
        `want` (the default): the waiter needs this one, not every backend (see `wait_for`)."""
        await self.wait_for(lambda status: status not in WAITING or self._start_failed, timeout_s, want)

    def _set_status(self, status: Status) -> None:
        previous, self.status = self.status, status
        if status == Status.READY:
            self.last_error = None
            self._start_failed = False
            self._died = None
        if status != Status.READY:
            self.session = None
        self._changed.set()
        self._changed = anyio.Event()
        if previous != status:
            self.sink.status_changed(self, previous)

    async def _connect_and_serve(self, ready_at: list[float]) -> None:
        self._lost = anyio.Event()
        self.process = None
        async with AsyncExitStack() as stack:
            if self.starts is not None:
                await self.starts.take(self, self._wanted)
                stack.callback(self.starts.release, self)
            read, write = await stack.enter_async_context(self._open_transport())
            self.dispatcher = BackendDispatcher(read, write)
            session = await stack.enter_async_context(
                ClientSession(
                    dispatcher=self.dispatcher,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    elicitation_callback=self._on_elicit,
                    sampling_callback=self._on_sample,
                    list_roots_callback=self._on_roots,
                    client_info=types.Implementation(name="emceepee", version=__version__),
                )
            )
            await self._start_session(session)
            async with anyio.create_task_group() as tg:
                self._refreshes = listing.Refreshes(tg, functools.partial(self._refresh, session=session))
                with anyio.fail_after(LIST_TIMEOUT_S):
                    self.offer = await listing.list_offer(session)
                self.session = session
                ready_at.append(anyio.current_time())
                if self.starts is not None:
                    self.starts.release(self)
                self._set_status(Status.READY)
                await first_of(self._stop, self._lost)
                if self._lost.is_set():
                    self._mark_lost()
                tg.cancel_scope.cancel()
            self.session = None
        if self._lost.is_set() and self.process is not None:  # reaped by now: the exit code is known
            self.last_error = self._ending()

    def _ending(self) -> str:
        """Why a ready connection ended, once the process is stopped."""
        assert self.process is not None
        if self.process.dropped is not None:
            return f"{self.process.dropped} ({_death_report(self.process)})"
        if self.process.returncode is not None and self.process.stopped_with is None:
            return f"exited ({_death_report(self.process)})"
        return f"closed the connection while running; emceepee stopped it ({_death_report(self.process)})"

    async def _start_session(self, session: ClientSession) -> None:
        """The handshake, bounded; a line of garbage on stdout fails it at once, not at the timeout."""
        self._garbled = None
        with anyio.fail_after(INITIALIZE_TIMEOUT_S):
            self._handshaking = anyio.CancelScope()
            try:
                with self._handshaking:
                    await connect.handshake(session, self.spec.protocol)
            finally:
                self._handshaking = None
        if self._garbled is not None:
            raise BackendError(
                f"wrote a line that is not JSON-RPC to stdout during start-up: {self._garbled}",
                hint="Its stdout must carry only JSON-RPC (logs belong on stderr): check the server's "
                "command and args; run it in a terminal to see what it prints.",
            )

    @asynccontextmanager
    async def _open_transport(self) -> AsyncIterator[connect.Streams]:
        opened = connect.open_transport(
            self.spec.expanded(),
            log_path=self.log_path,
            on_stderr=self._on_stderr,
            on_problem=self._on_problem,
        )
        try:
            async with opened as (streams, process):
                if process is None:
                    yield streams
                    return
                self.process = process
                self.sink.spawned(self, process)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_set_when, process.closed, self._lost)
                    # A launcher (npx, uvx, a shell) may die while the server it started keeps the
                    # pipes: the pid shown would be stale and the server unsupervised, so restart.
                    tg.start_soon(_set_when, process.exited, self._lost)
                    yield streams
                    tg.cancel_scope.cancel()
        finally:
            if self.process is not None:  # reaped by now: it has an exit status
                self.sink.ended(self, self.process)

    # ---- what the backend tells us ------------------------------------------------------

    def _on_stderr(self, line: str) -> None:
        self.sink.log(self.name, "stderr", line, "stderr")

    def _on_problem(self, text: str) -> None:
        log.warning("backend %s: %s", self.name, text)
        self.sink.log(self.name, "warning", text, "emceepee")

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return _answered_as(types.ElicitResult, await self.sink.question(self, Kind.ELICITATION, params))

    async def _on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return _answered_as(types.CreateMessageResult, await self.sink.question(self, Kind.SAMPLING, params))

    async def _on_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return await self.sink.roots_of(self)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else repr(params.data)
        self.sink.log(self.name, params.level, f"{params.logger}: {data}" if params.logger else data, "mcp")

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, Exception):
            self.sink.log(self.name, "error", str(message), "protocol")
            if self._handshaking is not None:
                self._garbled = str(message).removeprefix(
                    "backend wrote a line to stdout that is not JSON-RPC: "
                )
                self._handshaking.cancel()
            return
        if isinstance(message, types.LoggingMessageNotification | types.ProgressNotification):
            return  # logs arrive through _on_log, progress through each call's callback
        refresh = listing.REFRESHERS.get(type(message))
        if refresh is not None and self._refreshes is not None and self.session is not None:
            self._refreshes.ask(refresh)  # a storm of list_changed costs one running and one queued
        params = (
            message.params.model_dump(by_alias=True, mode="json", exclude_none=True) if message.params else {}
        )
        self.sink.notification(self.name, message.method, params)

    async def _refresh(self, refresh: listing.Refresher, *, session: ClientSession) -> None:
        try:
            with anyio.fail_after(LIST_TIMEOUT_S):
                await refresh(self.offer, session)
            self.sink.relisted(self, listing.LISTS[refresh])
        except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old listing
            self.sink.log(self.name, "warning", f"refreshing the listing failed: {describe(exc)}", "emceepee")

    # ---- requests -------------------------------------------------------------------------

    def require_session(self) -> ClientSession:
        if self.status == Status.READY and self.session is not None:
            return self.session
        hint = {
            Status.STARTING: "Its start is taking long; list_servers shows when it is ready "
            "(await_activity hears server_connected), then call again.",
            Status.RESTARTING: "It fails at start-up and emceepee keeps retrying with backoff; fix what the "
            f"error says (get_logs(server='{self.name}') has its stderr)."
            if self._start_failed
            else "It crashed and is being restarted; call again once list_servers shows it ready.",
            Status.DISABLED: "Enable it in the config (enabled = true) or re-add it with add_server.",
            Status.STOPPED: "It was stopped; add it again with add_server.",
        }.get(self.status, "See list_servers for its last error and get_logs for its stderr.")
        detail = f": {self.last_error}" if self.last_error else ""
        raise BackendUnavailable(f"Backend '{self.name}' is {self.status}{detail}", hint=hint)

    async def tool(self, name: str) -> types.Tool:
        """The tool's listing; a name we have not seen triggers one fresh listing first."""
        tool = self.offer.tools.get(name)
        if tool is None and self.session is not None:
            await self.request("tools/list", functools.partial(listing.refresh_tools, self.offer))
            tool = self.offer.tools.get(name)
        if tool is None:
            raise NotFound(
                f"Backend '{self.name}' has no tool '{name}'." + closest(name, self.offer.tools),
                hint=f"List its tools with list_tools(server='{self.name}').",
            )
        return tool

    async def request(self, what: str, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        """Send one request. Every way it can fail is a `BackendError` for this request alone: the
        backend died (with its exit status and stderr tail), answered with an error, sent an answer
        the SDK rejects (a malformed result), the pipe broke, or a bound ran out."""
        if self._died is not None:  # it died since the call was sent its way: that is why it fails
            raise await self._connection_lost(what, self._died, sent=False)
        session, process = self.require_session(), self.process
        try:
            return await send(session)
        except EmceepeeError:
            raise
        except Refused as exc:
            raise self._refused(what, exc) from exc
        except Answered as exc:  # the backend's error for this request alone, whatever its code
            if (needs_url := url_questions.required(self.name, what, exc)) is not None:
                raise needs_url from exc
            raise backend_answered(self.name, what, exc) from exc
        except MCPError as exc:  # the SDK's own: the connection ended, or a bound it keeps ran out
            if closed(exc):
                raise await self._connection_lost(what, process) from exc
            raise answered_with_error(self.name, what, exc.code, exc.message) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            raise await self._connection_lost(what, process) from exc
        except TimeoutError as exc:
            raise BackendError(f"Backend '{self.name}' did not answer {what} in time.") from exc
        except Exception as exc:  # a malformed answer (pydantic), an output-schema mismatch, …
            log.debug("backend %s: %s failed", self.name, what, exc_info=True)
            raise BackendError(
                f"Backend '{self.name}' sent an answer to {what} that emceepee cannot use: {describe(exc)}",
                hint="This is a fault in the backend; the call was not retried. Its get_logs may say more.",
            ) from exc

    def _refused(self, what: str, exc: Refused) -> BackendError:
        return BackendError(
            f"emceepee refused backend '{self.name}'s answer to {what}: {exc}{exc.detail}",
            hint=exc.hint,
        )

    async def _connection_lost(
        self, what: str, process: transport.ProcessInfo | None, sent: bool = True
    ) -> BackendError:
        """Why `what` failed with the connection to `process`: emceepee stopped the backend, or closed
        the connection, or the process died (said once its exit status and stderr tail are known).
        `sent`: the request reached the connection before it ended (else the call was on its way)."""
        if process is self.process:  # not a later connection, which may be ready by now
            self._mark_lost()
        if self._stop.is_set() and self.stopped_for is not None:
            return BackendError(
                f"Backend '{self.name}' was {self.stopped_for.said} while {what} was running; "
                "the call was cut off.",
                hint=self.stopped_for.hint,
            )
        during = f"during {what}" if sent else f"before {what} was sent"
        if process is not None and process.dropped is not None:
            return BackendError(
                f"Backend '{self.name}' lost its connection {during}: {process.dropped}.",
                hint="It is being restarted; retry the call once list_servers shows it ready.",
            )
        if process is None:
            return BackendError(f"Lost the connection to backend '{self.name}' {during}")
        with anyio.move_on_after(DEATH_REPORT_WAIT_S):
            await process.settled.wait()
        exited = process.returncode is not None and process.stopped_with is None
        ended = "exited" if exited else "closed the connection"
        return BackendError(
            f"Backend '{self.name}' {ended} {during} ({_death_report(process)})",
            hint="It is being restarted; retry the call once list_servers shows it ready.",
        )


def _death_report(process: transport.ProcessInfo) -> str:
    """How the process ended, and the last lines of its stderr."""
    tail = "\n".join(list(process.stderr_tail)[-DEATH_TAIL_LINES:])[-DEATH_TAIL_CHARS:]
    return process.describe_exit() + (f"; stderr tail:\n{tail}" if tail else "")


def configured_roots(paths: tuple[str, ...]) -> list[types.Root]:
    """Roots as the config names them (a server's own `roots`, or `[defaults] roots`)."""
    return [types.Root(uri=uri, name=name) for uri, name in root_uris(paths)]  # type: ignore[arg-type]  # a file:// str is the URI pydantic wants


def _answered_as(
    kind: type[R], reply: types.ElicitResult | types.CreateMessageResult | types.ErrorData
) -> R | types.ErrorData:
    """The sink's answer, if it is of the kind the backend asked for (else an error for the backend)."""
    if isinstance(reply, kind | types.ErrorData):
        return reply
    return types.ErrorData(
        code=types.INTERNAL_ERROR, message=f"emceepee answered with a {type(reply).__name__}"
    )


async def first_of(*events: anyio.Event) -> None:
    """Return as soon as any of `events` is set."""
    async with anyio.create_task_group() as tg:
        for event in events:
            tg.start_soon(_set_when, event, None, tg.cancel_scope)


async def _set_when(
    event: anyio.Event, target: anyio.Event | None, scope: anyio.CancelScope | None = None
) -> None:
    await event.wait()
    if target is not None:
        target.set()
    if scope is not None:
        scope.cancel()
