"""One backend MCP server: its supervised connection, what it offers, and requests to it.

Lifecycle of `Backend.run` (one long-lived task per backend, which enters and exits the
transport and the session itself, as anyio requires):

    starting ─► ready ─► (process exits / connection lost) ─► restarting ─► ready …
        │         └─► failed (its server refused emceepee's credentials)
        │                                                      └─► failed (too many restarts)
        └─► failed (command not found, credentials refused, handshake failed or timed out too often)
    any state ─► stopped (emceepee shuts down, or the server was removed)

`stop()` cancels whatever the backend is doing, a handshake included; the transport's own stop
still runs, shielded and bounded. A call in flight when the backend dies fails at once with the
exit status and stderr tail; a call cut off because emceepee stopped the backend on purpose
(`stop(why)`) is told why (backends/ending.py says how a connection ended). A remote backend whose
server answers 401 or 403 is failed at once and not restarted (backends/authorization.py): every
call meanwhile is told what to set. What the backend says while connected (logs, notifications,
questions, list changes) goes through its `Listener` (backends/listener.py); how one request can
fail is said in backends/failures.py.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from enum import StrEnum
from typing import Protocol, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession

from emceepee_cli import __version__
from emceepee_cli.backends import connect, ending, listing, transport
from emceepee_cli.backends.authorization import Refusals, Unauthorized
from emceepee_cli.backends.dispatcher import BackendDispatcher
from emceepee_cli.backends.ending import StopReason
from emceepee_cli.backends.failures import brief, closest, connection_ended, describe, leaves, request_error
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.listener import Listener, MessageSink
from emceepee_cli.backends.logfile import LogFolder
from emceepee_cli.backends.sign_in import BackendSignIn
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.config import ServerSpec, root_uris
from emceepee_cli.errors import BackendError, BackendUnavailable, EmceepeeError, NotFound, hints, tools_step
from emceepee_cli.signin import flow
from emceepee_cli.signin.flow import Person

RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # one entry per attempt; then the backend is failed
STABLE_AFTER_S = 60.0  # ready this long, and the next crash starts the backoff afresh

T = TypeVar("T")

__all__ = ["WAITING", "Backend", "BackendSink", "Status", "brief", "describe", "first_of", "leaves"]


class Status(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    RESTARTING = "restarting"
    STOPPED = "stopped"
    DISABLED = "disabled"


WAITING = (Status.STARTING, Status.RESTARTING)


class BackendSink(MessageSink["Backend"], Protocol):
    """Where a backend reports what it says (backends/listener.py's `MessageSink`) and how its
    lifecycle goes (session/backend_sink.py implements it)."""

    def status_changed(self, backend: Backend, previous: Status) -> None: ...
    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None: ...
    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None: ...

    @property
    def sign_in(self) -> Person: ...  # who is asked when a remote backend's server wants a sign-in


class Backend:
    def __init__(
        self,
        spec: ServerSpec,
        sink: BackendSink,
        logs: LogFolder | None = None,
        starts: StartSlots | None = None,
        launch: Launch | None = None,
    ) -> None:
        self.spec = spec
        self.sink = sink
        self.launch = launch  # the host's environment and cwd, in the fleet (backends/launch.py)
        self.starts = starts  # how many backends boot at once (backends/start_limit.py); None: no limit
        self._wanted = anyio.Event()  # someone waits for it to start: it does not queue for a slot
        self.log = logs.of(spec.name) if logs is not None else None  # its stderr log, if it keeps one
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
        self.refusal: Unauthorized | None = None  # its server refused emceepee's credentials: failed for good
        self.listener = Listener(self, sink)  # what the backend says while connected
        self.sign_in = BackendSignIn(self, sink.sign_in)  # its server's sign-in (backends/sign_in.py)

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
                self.last_error = ending.failure(
                    exc, self.process, was_ready=bool(ready_at), lost=self._lost.is_set()
                )
                self._start_failed = not ready_at
                if any(isinstance(e, EmceepeeError) for e in leaves(exc)):
                    failures = len(RESTART_BACKOFF_S)  # a missing command or bad cwd stays wrong
            if self.refusal is not None:  # the same credentials would be refused again: no restart
                self.last_error = self.refusal.message
                self._set_status(Status.FAILED)
                return
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
        await self.wait_for(
            lambda status: status not in WAITING or self._start_failed or self.sign_in.prompt is not None,
            timeout_s,
            want,
        )

    def changed(self) -> None:
        """Wake whoever waits on the status (something they check besides it changed)."""
        self._changed.set()
        self._changed = anyio.Event()

    def _set_status(self, status: Status) -> None:
        previous, self.status = self.status, status
        if status == Status.READY:
            self.last_error = None
            self._start_failed = False
            self._died = None
        if status != Status.READY:
            self.session = None
        self.changed()
        if previous != status:
            self.sink.status_changed(self, previous)

    async def _connect_and_serve(self, ready_at: list[float]) -> None:
        self._lost = anyio.Event()
        self.process = None
        async with AsyncExitStack() as stack:
            if self.starts is not None:
                await self.starts.take(self, self._wanted)
                stack.callback(self.starts.release, self)
            spec = self.spec.expanded(None if self.launch is None else self.launch.environ)
            auth = flow.auth_for(spec, self.sign_in)
            refusals = (
                Refusals(self.spec, spec.headers, self.refused, auth is not None) if spec.remote else None
            )
            if auth is not None and refusals is not None:
                auth.on_final, auth.on_failed = refusals.on_response, self.sign_in.failed
                auth.on_no_sign_in = refusals.without_sign_in
            read, write = await stack.enter_async_context(self._open_transport(spec, refusals, auth))
            self.dispatcher = BackendDispatcher(read, write)
            self.dispatcher.refusals = refusals
            session = await stack.enter_async_context(
                ClientSession(
                    dispatcher=self.dispatcher,
                    logging_callback=self.listener.on_log,
                    message_handler=self.listener.on_message,
                    elicitation_callback=self.listener.on_elicit,
                    sampling_callback=self.listener.on_sample,
                    list_roots_callback=self.listener.on_roots,
                    client_info=types.Implementation(name="emceepee", version=__version__),
                )
            )
            await self.listener.handshake(session, self.spec.protocol)
            async with anyio.create_task_group() as tg:
                self.listener.relist_in(tg, session)
                with anyio.fail_after(listing.LIST_TIMEOUT_S):
                    self.offer = await listing.list_offer(session)
                self.session = session
                ready_at.append(anyio.current_time())
                if self.starts is not None:
                    self.starts.release(self)
                self._set_status(Status.READY)
                await first_of(self._stop, self._lost)
                if self._lost.is_set() and self.refusal is None:  # refused: failed, not restarting
                    self._mark_lost()
                tg.cancel_scope.cancel()
            self.session = None
        if self._lost.is_set() and self.process is not None:  # reaped by now: the exit code is known
            self.last_error = ending.lost_ready(self.process)

    def refused(self, refusal: Unauthorized) -> None:
        """Its server refused emceepee's credentials (backends/authorization.py): end the connection."""
        self.refusal = refusal
        self._lost.set()

    @asynccontextmanager
    async def _open_transport(
        self, spec: ServerSpec, refusals: Refusals | None, auth: flow.SignedIn | None
    ) -> AsyncIterator[connect.Streams]:
        opened = connect.open_transport(
            spec,
            log=self.log,
            on_stderr=self.listener.on_stderr,
            on_problem=self.listener.on_problem,
            refusals=refusals,
            auth=auth,
            patience=self.listener.patience,
            launch=self.launch,
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

    # ---- requests -------------------------------------------------------------------------

    def require_session(self) -> ClientSession:
        if (waiting := self.sign_in.unavailable()) is not None:
            raise waiting
        if self.status == Status.READY and self.session is not None:
            return self.session
        if self.refusal is not None and self.status == Status.FAILED:  # what to set, not only "failed"
            raise BackendUnavailable(self.refusal.message, hint=self.refusal.hint)
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
                **hints("List its tools with {}.", tools_step(self.name)),
            )
        return tool

    async def request(self, what: str, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        """Send one request. Every way it can fail is a `BackendError` for this request alone: the
        backend died (with its exit status and stderr tail), answered with an error, sent an answer
        the SDK rejects (a malformed result), the pipe broke, or a bound ran out."""
        if self._died is not None:  # it died since the call was sent its way: that is why it fails
            raise await self._cut_off(what, self._died, sent=False)
        session, process = self.require_session(), self.process
        try:
            return await send(session)
        except EmceepeeError:
            raise
        except Exception as exc:
            if connection_ended(exc):
                raise await self._cut_off(what, process) from exc
            raise request_error(self.name, what, exc) from exc

    async def _cut_off(
        self, what: str, process: transport.ProcessInfo | None, sent: bool = True
    ) -> BackendError:
        """The error of a request whose connection to `process` ended (backends/ending.py)."""
        if self.refusal is not None:  # its server refused emceepee: that is why, not the connection's end
            return self.refusal.again()
        if process is self.process:  # not a later connection, which may be ready by now
            self._mark_lost()
        return await ending.cut_off(self.name, what, process, self.stopped_for, sent=sent)


def configured_roots(paths: tuple[str, ...], launch: Launch | None = None) -> list[types.Root]:
    """Roots as the config names them (a server's own `roots`, or `[defaults] roots`); a relative
    one (or `~`) from the host's working directory (and HOME) in the fleet, else emceepee's."""
    base = None if launch is None else launch.base
    return [types.Root(uri=uri, name=name) for uri, name in root_uris(paths, base)]  # type: ignore[arg-type]  # a file:// str is the URI pydantic wants


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
