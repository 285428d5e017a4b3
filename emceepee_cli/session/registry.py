"""The registry of backends one `serve` runs: which exist, and changing that set.

One supervised `Backend` per configured server, plus those added at run time, each reporting
what it hears to session/backend_sink.py. The registry starts them all (never waiting for any),
looks one up by name (an unknown or broken one is an `EmceepeeError` that says what to do next),
adds and removes one (`add_server` / `remove_server`, once session/server_changes.py allows it),
goes over to a reloaded config file (only the servers whose tables changed start, stop or
restart: config/reload.py), and stops them all. One change of the set at a time.

What the meta-tools ask of the backends it holds is answered by session/servers.py.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from emceepee_cli import config as config_mod
from emceepee_cli.backends import transport
from emceepee_cli.backends.backend import Backend, BackendSink, Status
from emceepee_cli.backends.ending import StopReason
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.logfile import LogFolder
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.config import Config, ConfigProblem, PathBase, ServerSpec, reload
from emceepee_cli.config.reload import Plan
from emceepee_cli.errors import NotFound, UsageError
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.direct import Direct
from emceepee_cli.store.records import TaskStatus

if TYPE_CHECKING:
    from emceepee_cli.session.backend_sink import SessionSink
    from emceepee_cli.session.pool import Pool

READY_WAIT_S = 10.0  # a request (not a tool call) to a backend that is still starting waits this long
STOP_WAIT_S = transport.STOP_BOUND_S + 2.0

# What a call cut off by a backend's stop is told (backends/backend.py).
REMOVED = StopReason("removed (remove_server)", "It is no longer configured; add it again to call it.")
UNCONFIGURED = StopReason(
    "stopped because its table was removed from the config file",
    "It is no longer configured; add it back to the config to call it.",
)
RECONFIGURED = StopReason(
    "restarted because its table in the config file changed",
    "Call the tool again once list_servers shows it ready.",
)


SIGNED_IN = StopReason(
    "restarted because someone signed in to its server",
    "Call the tool again once list_servers shows it ready.",
)
SIGN_IN_LOOK_S = 1.0


class Registry:
    def __init__(
        self,
        config: Config,
        runtime: Runtime,
        *,
        sink: BackendSink,
        backends: dict[str, Backend],
        direct: Direct | None = None,
        log_dir: Path | None = None,
        launch: Launch | None = None,
        pool: tuple[Pool, SessionSink] | None = None,
    ) -> None:
        self.config = config
        # In the fleet: the backends come from its pool (session/pool.py), shared with other hosts'
        # sessions, with this session's sink as the user; in-process each is this registry's own.
        self.pool = pool
        self.launch = launch  # the host's environment and cwd, in the fleet (backends/launch.py)
        self.runtime = runtime
        self.sink = sink  # what every backend reports to (session/backend_sink.py)
        self.backends = backends
        self.direct = direct  # backend tools on the host's own tools/list: told when one goes
        self.log_dir = log_dir
        self.starts = StartSlots()  # how many backends boot at once
        self.changing = anyio.Lock()  # one change of the set of backends at a time (tools, reload)
        # Each backend's table as the file (or add_server) gave it, before [defaults] add to it: what
        # a reload compares, so a table that did not change never looks changed.
        self.tables: dict[str, ServerSpec] = {}
        self._following = anyio.CancelScope()  # `follow_sign_ins`, until `stop_all`

    def __repr__(self) -> str:
        return f"<Registry {list(self.backends)}>"

    def start_all(self) -> None:
        """Start every configured backend concurrently; never waits for any. A remote backend whose
        sign-in failed starts again once someone signs in to it elsewhere (`follow_sign_ins`)."""
        for spec in self.config.servers.values():
            self._start(spec)
        self.runtime.spawn(self.follow_sign_ins, name="sign-in follow")

    async def follow_sign_ins(self) -> None:
        """Restart each backend failed by a sign-in once its tokens change (`emceepee auth login`
        in a terminal, another serve): a look at a file's signature a second, for those only."""
        with self._following:
            while True:
                await anyio.sleep(SIGN_IN_LOOK_S)
                await self._restart_signed_in()

    async def _restart_signed_in(self) -> None:
        for name, backend in list(self.backends.items()):
            if backend.status == Status.FAILED and backend.sign_in.signed_in_elsewhere():
                async with self.changing:
                    if self.backends.get(name) is backend:
                        await self._retire(name, SIGNED_IN)
                        self._start(self.tables.get(name, backend.spec))

    def _start(self, spec: ServerSpec) -> Backend:
        self.tables[spec.name] = spec
        if self.config.defaults.pass_env:  # every backend's, then its own
            spec = replace(spec, pass_env=(*self.config.defaults.pass_env, *spec.pass_env))
        if self.pool is not None:
            pool, user = self.pool
            roots = self.config.defaults.roots
            backend = self.backends[spec.name] = pool.acquire(spec, self.launch, user, roots)
            if self.direct is not None:  # a warm one was announced before it was in `backends`
                self.direct.changed()
            return backend
        logs = LogFolder(self.log_dir, self.config.defaults.log_backups) if self.log_dir else None
        backend = Backend(spec, self.sink, logs, self.starts, self.launch)
        self.backends[spec.name] = backend
        self.runtime.spawn(backend.run, name=f"backend {spec.name}")
        return backend

    def stop_all(self) -> None:
        """Stop every backend (in the fleet: leave each, to the other sessions or warm for a while)."""
        self._following.cancel()
        for backend in self.backends.values():
            if self.pool is not None:
                self.pool[0].release(backend, self.pool[1], None)
            else:
                backend.stop()

    # ---- looking one up -------------------------------------------------------------------

    def backend(self, name: str) -> Backend:
        backend = self.backends.get(name)
        if backend is None:
            broken = [p for p in self.config.problems if p.server == name]
            if broken:
                raise NotFound(
                    f"Server '{name}' is in the config but could not load: {config_error(broken)}",
                    hint="Fix the config.",
                )
            known = ", ".join(sorted(self.backends)) or "none"
            raise NotFound(
                f"Unknown server '{name}'. Known: {known}.",
                hint="Add it with add_server, or in a terminal: "
                f"emceepee servers add {name} -- <command> [args…]",
            )
        return backend

    async def ready(self, name: str) -> Backend:
        backend = self.backend(name)
        await backend.wait_ready(READY_WAIT_S)
        backend.require_session()
        return backend

    async def selected(self, server: str | None, wait_s: float = READY_WAIT_S) -> list[Backend]:
        """One named backend, or all of them, after a bounded wait for any still starting."""
        chosen = [self.backend(server)] if server else list(self.backends.values())
        with anyio.move_on_after(wait_s):
            for backend in chosen:
                await backend.wait_ready(READY_WAIT_S, want=server is not None)
        return chosen

    # ---- changing the set ----------------------------------------------------------------

    @property
    def base(self) -> PathBase | None:
        """Where a relative root of a server added here starts: the host's cwd in the fleet."""
        return None if self.launch is None else self.launch.base

    def check_new(self, spec: ServerSpec) -> None:
        """Refuse a server that cannot be added: its name is taken, or the config could not hold it."""
        if spec.name in self.backends:
            raise UsageError(
                f"Server '{spec.name}' already exists.",
                hint=f"Remove it first with remove_server('{spec.name}').",
            )
        config_mod.check_spec(spec, self.base)

    async def add(self, spec: ServerSpec, persist: bool) -> Backend:
        """Start `spec` (and save it); the backend, once ready or after a bounded wait."""
        self.check_new(spec)
        async with self.changing:  # a reload that sees the saved file finds the backend running
            if persist:  # in a thread: the file lock may be held by a CLI for a moment
                add = functools.partial(config_mod.add_server, base=self.base)
                await anyio.to_thread.run_sync(add, spec, self.config.path)
            backend = self._start(spec)
        await backend.wait_ready(READY_WAIT_S)
        return backend

    async def remove(self, name: str) -> tuple[Backend, bool]:
        """Stop and forget a backend, and take it out of the config file; the backend as it
        ended, and whether the file named it."""
        self.backend(name)
        async with self.changing:
            backend = await self._retire(name, REMOVED)
        removed_from_config = await anyio.to_thread.run_sync(
            config_mod.discard_server, name, self.config.path
        )
        return backend, removed_from_config

    async def reconfigure(self, config: Config) -> Plan:
        """Go over to a reloaded config file: only the servers that changed in it start, stop or
        restart (config/reload.py says which); what was done."""
        async with self.changing:
            plan = self.plan(config)
            async with anyio.create_task_group() as tg:
                for name, why in [
                    *((name, UNCONFIGURED) for name in plan.stop),
                    *((spec.name, RECONFIGURED) for spec in plan.restart),
                ]:
                    if name in self.backends:
                        tg.start_soon(self._retire, name, why)
            for spec in (*plan.restart, *plan.start):
                if spec.name not in self.backends:
                    self._start(spec)
            self.config = config
        return plan

    def plan(self, config: Config) -> Plan:
        """What `reconfigure(config)` would do now; nothing is touched."""
        running = {name: self.tables.get(name, backend.spec) for name, backend in self.backends.items()}
        return reload.plan(running, self.config, config)

    async def _retire(self, name: str, why: StopReason) -> Backend:
        """Stop a backend (bounded) and forget it; the calls it cuts off are told `why`."""
        backend = self.backends[name]
        stopped = True
        if self.pool is not None:  # the last session using it stops it
            stopped = self.pool[0].release(backend, self.pool[1], why)
            if not stopped:  # others use it on: this session's calls on it end as a stop ends them
                for call in self.pool[1].tasks.calls:
                    if call.server == name and not call.ended:
                        call.stop(TaskStatus.INTERRUPTED)
        else:
            backend.stop(why)
        if stopped:
            await backend.wait_for(
                lambda s: s in (Status.STOPPED, Status.FAILED, Status.DISABLED), STOP_WAIT_S
            )
        self.backends.pop(name, None)
        self.tables.pop(name, None)
        if self.direct is not None:
            self.direct.changed()
        return backend


def config_error(problems: list[ConfigProblem]) -> str:
    """Every problem of one server's table, in one line."""
    parts = [f"field '{p.field}': {p.message}" if p.field else p.message for p in problems]
    return "config: " + "; ".join(parts)
