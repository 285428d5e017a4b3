"""The fleet's backends, each shared by the host sessions whose process would be the same.

In the fleet (emceepee_cli/fleet/daemon.py) every host's session keeps its own registry (session/
registry.py: which names it has, its own tables and `add_server`s), but the backends behind those
names come from one `Pool`, keyed by `sharing_key` (session/sharing.py). Lifecycle of one instance:

- `acquire`: the first session whose server has this key starts it, in the fleet's task group (it
  outlives that session); later ones attach to it, warm — unless it failed: a new session starts a
  new instance, as a new `serve` would (the user may have fixed what failed it). A session
  attaching to one already past its start hears where it is (as if it had just connected), so its
  host's lists and events see it.
- `release`: a session leaves it. One that leaves because the host closed its session (`why`
  None) leaves it warm for `linger_s` (`[fleet] idle_exit`) should no other session use it, then
  it stops; one that leaves because its table changed or went (`why`), as the last user, stops it at
  once, saying why to any call it cuts off. A failed instance is retired from sharing when a session
  restarts it (a sign-in from a terminal): the next acquire starts a new one.
- `stop_all`: the fleet is leaving.

What an instance says goes through its `FanOut` (the `BackendSink` of every pooled backend): a
notification, a log line, a changed list or status, to every attached session (each host sees each
event once, in its own session); the processes it starts, to the fleet's own book, journaled
under the fleet's instance, which lives as long as the processes do; a question, to the session
whose call can have asked it (session/backend_sink.py's `could_ask`): when calls of several hosts
can have, or none and several hosts use it, it is parked without being forwarded to any host, so
no host's model is shown another's question as its own; its roots, what every attached host
grants (their common roots), so a shared backend never sees a root one of its hosts did not give;
a sign-in, to the host that has used it longest.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types

from emceepee_cli.backends import transport
from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.backends.ending import StopReason
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.logfile import LogFolder
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.config import ServerSpec
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.backend_sink import ProcessBook, SessionSink
from emceepee_cli.session.roots import tell_changed
from emceepee_cli.session.sharing import SharingKey, sharing_key

log = logging.getLogger(__name__)
T = TypeVar("T")

STOP_WAIT_S = transport.STOP_BOUND_S + 2.0


class Pool:
    def __init__(
        self, runtime: Runtime, book: ProcessBook, log_dir: Path | None, linger_s: float, log_backups: int = 1
    ) -> None:
        self.runtime = runtime  # the fleet's: an instance outlives the session that started it
        self.book = book
        self.logs = LogFolder(log_dir, log_backups) if log_dir is not None else None
        self.linger_s = linger_s
        self.starts = StartSlots()  # how many backends boot at once, fleet-wide
        self.instances: dict[SharingKey, Instance] = {}
        self._of: dict[int, Instance] = {}  # id(backend) -> its instance, retired ones too

    def __repr__(self) -> str:
        return f"<Pool instances={len(self.instances)}>"

    def acquire(
        self, spec: ServerSpec, launch: Launch | None, user: SessionSink, default_roots: tuple[str, ...] = ()
    ) -> Backend:
        """The backend `user`'s session gets for `spec` (`default_roots`: its `[defaults] roots`): a
        running instance with its key, or a new one."""
        key = sharing_key(spec, launch, user.instance_id, default_roots)
        instance = self.instances.get(key)
        if instance is not None and instance.backend.status == Status.FAILED:
            self._retire(instance)  # a new session tries again, as a new serve would (a fixed PATH…)
            instance = None
        if instance is None:
            fan = FanOut(self.book, self.runtime)
            instance = Instance(key, Backend(spec, fan, self.logs, self.starts, launch), fan)
            self.instances[key] = instance
            self._of[id(instance.backend)] = instance
            self.runtime.spawn(instance.backend.run, name=f"backend {spec.name} ({key})")
            log.info("backend %s: started for session %s", key, user.instance_id)
        else:
            log.info("backend %s: shared with session %s", key, user.instance_id)
        instance.linger.cancel()
        instance.fan.attach(instance.backend, user)
        return instance.backend

    def release(self, backend: Backend, user: SessionSink, why: StopReason | None) -> bool:
        """`user`'s session no longer uses `backend`; whether that stopped it."""
        instance = self._of.get(id(backend))
        if instance is None:
            return False
        instance.fan.detach(user, backend)
        if why is not None and backend.status == Status.FAILED:
            self._retire(instance)  # it is being started again: others move on as they restart it
        if instance.fan.users:
            return False
        if (
            why is None
            and self.linger_s > 0
            and not instance.key.personal  # no later session could attach to it
            and self.instances.get(instance.key) is instance
        ):
            instance.linger = linger = anyio.CancelScope()
            self.runtime.spawn(self._linger, instance, linger, name=f"linger {instance.key}")
            return False
        self._stop(instance, why)
        return True

    async def _linger(self, instance: Instance, linger: anyio.CancelScope) -> None:
        """Keep an unused instance warm for `linger_s`, then stop it (unless a session took it)."""
        with linger:
            await anyio.sleep(self.linger_s)
            if not instance.fan.users:
                log.info(
                    "backend %s: unused for %gs ([fleet] idle_exit); stopping", instance.key, self.linger_s
                )
                self._stop(instance, None)

    def _stop(self, instance: Instance, why: StopReason | None) -> None:
        self._retire(instance)
        self._of.pop(id(instance.backend), None)
        instance.backend.stop(why)

    def _retire(self, instance: Instance) -> None:
        if self.instances.get(instance.key) is instance:
            del self.instances[instance.key]

    async def stop_all(self) -> None:
        """Stop every instance (the fleet is leaving), bounded."""
        running = list(self._of.values())
        for instance in running:
            instance.linger.cancel()
            self._stop(instance, None)
        with anyio.move_on_after(STOP_WAIT_S):
            for instance in running:
                await instance.backend.wait_for(_ended, STOP_WAIT_S)

    def users_of(self, backend: Backend) -> list[SessionSink]:
        """The sessions that use `backend` now."""
        instance = self._of.get(id(backend))
        return list(instance.fan.users) if instance is not None else []

    def __iter__(self) -> Iterator[Instance]:
        return iter(list(self._of.values()))

    def describe(self) -> list[dict[str, Any]]:
        """Every instance, for `emceepee fleet status`: no value that went into a key."""
        return [
            {
                "server": instance.key.server,
                "key": str(instance.key),
                "pid": instance.backend.pid,
                "status": instance.backend.status.value,
                "hosts": [user.instance_id for user in instance.fan.users],
                "shared": self.instances.get(instance.key) is instance,
            }
            for instance in self
        ]


def _ended(status: Status) -> bool:
    return status in (Status.STOPPED, Status.FAILED, Status.DISABLED)


@dataclass(eq=False)
class Instance:
    key: SharingKey
    backend: Backend
    fan: FanOut
    linger: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def __repr__(self) -> str:
        return f"<Instance {self.key} users={len(self.fan.users)}>"


class FanOut:
    """The sink of one pooled backend: what it says, to the sessions that use it (see the module)."""

    def __init__(self, book: ProcessBook, runtime: Runtime) -> None:
        self.book = book
        self.runtime = runtime
        self.asked_roots = False  # it has asked for roots: told when the hosts granting them change
        self.users: list[SessionSink] = []  # in the order they attached
        self.sign_in = FirstHost(self)
        self._narrowed = False  # logged once: its hosts grant different roots
        self._holding: dict[SessionSink, set[anyio.CancelScope]] = {}  # what each user is asked now

    def __repr__(self) -> str:
        return f"<FanOut users={[u.instance_id for u in self.users]}>"

    def attach(self, backend: Backend, user: SessionSink) -> None:
        if user in self.users:
            return
        self.users.append(user)
        if backend.status != Status.STARTING:  # it is past where the session would have heard it
            user.status_changed(backend, Status.STARTING)
        self._roots_may_differ(backend)

    def detach(self, user: SessionSink, backend: Backend | None = None) -> None:
        """The user's session leaves: what it was holding for the backend (a question, a sign-in)
        ends now, so the backend hears an error rather than waiting on a session that is gone
        (the question's row is settled by the next take-over, as a dead serve's are)."""
        if user in self.users:
            self.users.remove(user)
            if backend is not None and self.users:
                self._roots_may_differ(backend)
        for scope in self._holding.pop(user, set()):
            scope.cancel()

    def _roots_may_differ(self, backend: Backend) -> None:
        """The hosts that grant a backend its roots changed: one that asked for them before asks
        again (their common roots may be more, or fewer, now)."""
        if self.asked_roots and backend.status == Status.READY:
            self.runtime.spawn(tell_changed, backend, name=f"roots changed {backend.name}")

    async def held(self, user: SessionSink, work: Callable[[], Awaitable[T]]) -> T | None:
        """`work` done by `user`'s session, or None when that session left meanwhile."""
        scope = anyio.CancelScope()
        self._holding.setdefault(user, set()).add(scope)
        try:
            with scope:
                return await work()
            return None
        finally:
            self._holding.get(user, set()).discard(scope)

    # ---- what it says, to every session that uses it ---------------------------------------

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        for user in list(self.users):
            user.notification(server, method, params)

    def log(self, server: str, level: str, message: str, source: str) -> None:
        for user in list(self.users):
            user.log(server, level, message, source)

    def relisted(self, backend: Backend, listed: str) -> None:
        for user in list(self.users):
            user.relisted(backend, listed)

    def status_changed(self, backend: Backend, previous: Status) -> None:
        for user in list(self.users):
            user.status_changed(backend, previous)

    # ---- its processes: the fleet's own -----------------------------------------------------

    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None:
        self.book.spawned(backend.name, process)

    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None:
        self.book.ended(process)

    # ---- what it asks: one host's, or nobody's ----------------------------------------------

    async def question(
        self,
        backend: Backend,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
        users = list(self.users)
        if not users:
            return _nobody("No host uses this server now; ask again during a call.")
        asking = [user for user in users if user.could_ask(backend)]
        holder = (asking or users)[0]
        if len(asking) == 1 or (len(users) == 1 and not asking):
            answered = await self.held(holder, lambda: holder.question(backend, kind, params))
        else:
            why = "calls of several hosts can have asked it" if asking else "several hosts use this server"
            askers = frozenset().union(*(u.tasks.askers.could_ask(backend.name, sole=False) for u in asking))
            answered = await self.held(
                holder,
                lambda: holder.question(backend, kind, params, forward_why_not=why, shared_askers=askers),
            )
        if answered is None:
            return _nobody("The host session that held this question ended; ask again.")
        return answered

    async def roots_of(self, backend: Backend) -> types.ListRootsResult:
        """What every attached host grants: their roots, or those they have in common."""
        self.asked_roots = True
        answers = [await user.roots_of(backend) for user in list(self.users)]
        if not answers:
            return types.ListRootsResult(roots=[])
        common = _common_roots([answer.roots for answer in answers])
        if len(common) != len(answers[0].roots) and not self._narrowed:
            self._narrowed = True
            log.warning(
                "backend %s: its hosts grant different roots; it is told only those they share "
                "(per_host = true in its table gives each host its own)",
                backend.name,
            )
        return types.ListRootsResult(roots=common)


def _nobody(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.INTERNAL_ERROR, message=message)


def _common_roots(granted: list[list[types.Root]]) -> list[types.Root]:
    uris = set.intersection(*({str(root.uri) for root in roots} for roots in granted))
    return [root for root in granted[0] if str(root.uri) in uris]


class FirstHost:
    """The `Person` of a pooled backend's sign-in: the host that has used it longest (its session's
    sign-in questions, session/backend_sink.py), asked when the sign-in starts."""

    def __init__(self, fan: FanOut) -> None:
        self.fan = fan
        self.asked: dict[str, SessionSink] = {}

    async def show(self, server: str, url: str) -> None:
        if not self.fan.users:
            return
        user = self.asked[server] = self.fan.users[0]
        await user.sign_in.show(server, url)

    async def declined(self, server: str) -> str:
        user = self.asked.get(server)
        if user is None:
            return "no host was connected to be asked"
        said = await self.fan.held(user, lambda: user.sign_in.declined(server))
        return "the host that was asked to sign in has left" if said is None else said

    async def done(self, server: str, signed_in: bool) -> None:
        user = self.asked.pop(server, None)
        if user is not None:
            await user.sign_in.done(server, signed_in)
