"""What one backend says to emceepee, passed to its sink: its stderr and MCP logs, its notifications,
its questions (elicitation, sampling), its requests for roots, and its lists changing.

`Listener` holds the callbacks a backend's `ClientSession` is opened with (backends/backend.py opens
it). A `list_changed` notification re-lists that kind (backends/listing.py's `Refreshes`: a storm
costs one re-listing running and one queued); a failed re-listing keeps the old listing. During the
handshake a line on stdout that is not JSON-RPC fails the start at once, not at the timeout.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import ClientSession
from mcp.client.session import ClientRequestContext

from emceepee_cli.backends import connect, listing
from emceepee_cli.backends.failures import describe
from emceepee_cli.errors import BackendError
from emceepee_cli.signin.flow import Patience
from emceepee_cli.store.records import Kind

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT_S = 60.0  # first runs of `uvx`/`npx` download packages before answering
GARBLED = "backend wrote a line to stdout that is not JSON-RPC: "  # how the transport says it

R = TypeVar("R", types.ElicitResult, types.CreateMessageResult)


class Listened(Protocol):
    """What the listener reads of its backend."""

    @property
    def name(self) -> str: ...
    @property
    def offer(self) -> listing.Offer: ...
    @property
    def session(self) -> ClientSession | None: ...


B = TypeVar("B", bound=Listened)  # the backend a listener listens to
B_contra = TypeVar("B_contra", contravariant=True)  # the backend a sink is told about


class MessageSink(Protocol[B_contra]):
    """Where a backend's own messages go (backends/backend.py's `BackendSink` adds its lifecycle)."""

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None: ...
    def log(self, server: str, level: str, message: str, source: str) -> None: ...
    async def question(
        self,
        backend: B_contra,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData: ...
    async def roots_of(self, backend: B_contra) -> types.ListRootsResult: ...
    def relisted(self, backend: B_contra, listed: str) -> None: ...  # "tools", "resources" or "prompts"


class Listener(Generic[B]):
    def __init__(self, backend: B, sink: MessageSink[B]) -> None:
        self.backend = backend
        self.sink = sink
        self._handshaking: anyio.CancelScope | None = None
        self.patience = Patience()  # time limits a sign-in does not count against (signin/flow.py)
        self._garbled: str | None = None
        self._refreshes: listing.Refreshes | None = None

    def __repr__(self) -> str:
        return f"<Listener {self.backend.name} refreshes={self._refreshes!r}>"

    async def handshake(self, session: ClientSession, protocol: str) -> None:
        """The handshake, bounded; a line of garbage on stdout fails it at once, not at the timeout."""
        self._garbled = None
        limit = anyio.CancelScope(deadline=anyio.current_time() + INITIALIZE_TIMEOUT_S)
        self.patience.watch(limit, INITIALIZE_TIMEOUT_S)  # a person signing in meanwhile does not count
        with limit:
            self._handshaking = anyio.CancelScope()
            try:
                with self._handshaking:
                    await connect.handshake(session, protocol)
            finally:
                self._handshaking = None
                self.patience.forget(limit)
        if limit.cancelled_caught:
            raise TimeoutError
        if self._garbled is not None:
            raise BackendError(
                f"wrote a line that is not JSON-RPC to stdout during start-up: {self._garbled}",
                hint="Its stdout must carry only JSON-RPC (logs belong on stderr): check the server's "
                "command and args; run it in a terminal to see what it prints.",
            )

    def relist_in(self, task_group: anyio.abc.TaskGroup, session: ClientSession) -> None:
        """Re-listings of this connection run in `task_group`, over `session`."""
        self._refreshes = listing.Refreshes(task_group, functools.partial(self._refresh, session=session))

    def on_stderr(self, line: str) -> None:
        self.sink.log(self.backend.name, "stderr", line, "stderr")

    def on_problem(self, text: str) -> None:
        log.warning("backend %s: %s", self.backend.name, text)
        self.sink.log(self.backend.name, "warning", text, "emceepee")

    async def on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return _answered_as(
            types.ElicitResult, await self.sink.question(self.backend, Kind.ELICITATION, params)
        )

    async def on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return _answered_as(
            types.CreateMessageResult, await self.sink.question(self.backend, Kind.SAMPLING, params)
        )

    async def on_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return await self.sink.roots_of(self.backend)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else repr(params.data)
        self.sink.log(
            self.backend.name, params.level, f"{params.logger}: {data}" if params.logger else data, "mcp"
        )

    async def on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, Exception):
            self.sink.log(self.backend.name, "error", str(message), "protocol")
            if self._handshaking is not None:
                self._garbled = str(message).removeprefix(GARBLED)
                self._handshaking.cancel()
            return
        if isinstance(message, types.LoggingMessageNotification | types.ProgressNotification):
            return  # logs arrive through on_log, progress through each call's callback
        refresh = listing.REFRESHERS.get(type(message))
        if refresh is not None and self._refreshes is not None and self.backend.session is not None:
            self._refreshes.ask(refresh)  # a storm of list_changed costs one running and one queued
        params = (
            message.params.model_dump(by_alias=True, mode="json", exclude_none=True) if message.params else {}
        )
        self.sink.notification(self.backend.name, message.method, params)

    async def _refresh(self, refresh: listing.Refresher, *, session: ClientSession) -> None:
        try:
            with anyio.fail_after(listing.LIST_TIMEOUT_S):
                await refresh(self.backend.offer, session)
            self.sink.relisted(self.backend, listing.LISTS[refresh])
        except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old listing
            self.sink.log(
                self.backend.name, "warning", f"refreshing the listing failed: {describe(exc)}", "emceepee"
            )


def _answered_as(
    kind: type[R], reply: types.ElicitResult | types.CreateMessageResult | types.ErrorData
) -> R | types.ErrorData:
    """The sink's answer, if it is of the kind the backend asked for (else an error for the backend)."""
    if isinstance(reply, kind | types.ErrorData):
        return reply
    return types.ErrorData(
        code=types.INTERNAL_ERROR, message=f"emceepee answered with a {type(reply).__name__}"
    )
