"""The roots each backend is told about (`roots/list`), and telling it when they change.

Every backend is offered the `roots` capability (backends start before the host connects, so the
offer cannot depend on the host). Its answer, in order of precedence: the server's own `roots`
from the config; else the host's roots, when the host declared `roots`; else `[defaults] roots`;
else none. A relative configured root (or `~`) is taken from emceepee's working directory (and
HOME), in the fleet from the host's (backends/launch.py). The host's roots are fetched once on
its standalone channel and kept until the host says they changed, so a backend that asks often
costs the host nothing, and a host that fails `roots/list` is asked again only after its next
`list_changed` (its backends get the defaults).
A 2026-07-28 host takes no `roots/list`: its roots come in an input round of its tool call
(session/roots_round.py) and are kept the same way. When what a backend would be answered
changes, it is sent `notifications/roots/list_changed`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend, Status, configured_roots
from emceepee_cli.backends.failures import describe
from emceepee_cli.backends.launch import Launch
from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.questions.host_link import HostLink
from emceepee_cli.runtime import Runtime

log = logging.getLogger(__name__)

HOST_ROOTS_TIMEOUT_S = 10.0

RootList = list[types.Root]


class Roots:
    def __init__(
        self,
        defaults: Defaults,
        host: HostLink,
        runtime: Runtime,
        backends: Callable[[], list[Backend]],
        launch: Launch | None = None,
    ) -> None:
        self.launch = launch  # in the fleet, the host's: where its relative roots start
        self.defaults = configured_roots(defaults.roots, launch)
        self.host = host
        self.runtime = runtime
        self.backends = backends
        self.host_roots: RootList | None = None  # None: not fetched, or the host has none to give
        self._fetched = False
        self._lock = anyio.Lock()
        self.told: dict[str, RootList] = {}  # server -> what it was last answered

    def __repr__(self) -> str:
        shown = "unknown" if not self._fetched else len(self.host_roots or [])
        return f"<Roots host={shown} defaults={len(self.defaults)}>"

    def _host_has_roots(self) -> bool:
        caps = self.host.capabilities
        return self.host.can_send() and caps is not None and caps.roots is not None

    async def for_backend(self, spec: ServerSpec) -> types.ListRootsResult:
        """A backend's roots/list: its own, else the host's, else the defaults."""
        roots = await self._effective(spec)
        self.told[spec.name] = roots
        return types.ListRootsResult(roots=roots)

    async def _effective(self, spec: ServerSpec) -> RootList:
        if spec.roots:
            return configured_roots(spec.roots, self.launch)
        if self._host_has_roots():
            await self._fetch_host()
        if self.host_roots is not None:  # fetched, or given in a round
            return self.host_roots
        return self.defaults

    def wants_host_roots(self) -> bool:
        """Whether a 2026-07-28 host is to be asked its roots in a round: they are not known yet
        (or it said they changed), and some backend would be answered with them (no roots of its own)."""
        return not self._fetched and any(not backend.spec.roots for backend in self.backends())

    def from_host_round(self, roots: RootList) -> None:
        """A 2026-07-28 host's roots, given in an input round: kept until it says they changed, and
        told to every backend whose answer they change."""
        self.host_roots, self._fetched = list(roots), True
        self.runtime.spawn(self.refresh, name="host roots from a round")

    async def _fetch_host(self) -> None:
        """The host's roots, once until it says they changed (concurrent askers share one fetch)."""
        async with self._lock:
            if self._fetched:
                return
            self._fetched = True
            session = self.host.session
            assert session is not None
            try:
                with anyio.fail_after(HOST_ROOTS_TIMEOUT_S):
                    result = await session.send_request(types.ListRootsRequest(), types.ListRootsResult)
                self.host_roots = list(result.roots)
            except Exception as exc:  # noqa: BLE001 - a host that cannot say its roots leaves the defaults
                self.host_roots = None
                log.warning(
                    "the host's roots/list failed (%s); backends get the configured roots", describe(exc)
                )

    def host_connected(self) -> None:
        """The host is known now: backends answered before may have got the defaults instead."""
        if self._host_has_roots():
            self.runtime.spawn(self.refresh, name="host roots")

    def host_changed(self) -> None:
        """The host's notifications/roots/list_changed."""
        self._fetched = False
        self.runtime.spawn(self.refresh, name="host roots changed")

    async def refresh(self) -> None:
        """Tell every ready backend whose answer would now differ from its last one."""
        for backend in self.backends():
            told = self.told.get(backend.name)
            if told is None or backend.status != Status.READY:
                continue  # never asked: it will ask when it wants them
            if await self._effective(backend.spec) != told:
                self.runtime.spawn(tell_changed, backend, name=f"roots changed {backend.name}")


async def tell_changed(backend: Backend) -> None:
    """Send the backend `notifications/roots/list_changed` (it asks again when it wants them)."""
    session = backend.session
    if session is None:
        return
    try:
        await session.send_notification(types.RootsListChangedNotification())
    except Exception as exc:  # noqa: BLE001 - a backend that is going away asks again when back
        log.debug("backend %s: roots/list_changed not sent: %r", backend.name, exc)
