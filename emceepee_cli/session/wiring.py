"""The one place `serve`'s parts are built and joined.

What every part stands on — the journal, the events, the runtime, `[defaults]` and the instance
id — is one `Shared` (emceepee_cli/shared.py), built here once; beside it each part gets only the
narrow things it uses, at construction. Dependencies run one way (servers → tasks → questions →
events, all on `Shared`), and the few calls that go back up are listeners and lookups given here
— questions announce a waiting question to the tasks, look a server's forwarding policy up in
the registry of backends, and log to what the backends said; tasks look a backend up by name.
The meta-tools get `Services` and call one method of a part: `servers` for what the backends
offer, `registry` for which backends run.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.abc

from emceepee_cli import seal
from emceepee_cli.backends import leftovers
from emceepee_cli.backends.backend import Backend
from emceepee_cli.backends.descendants import Descendants
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.notifications import Heard
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.config import Config, Defaults, Policy, forwarding_policy
from emceepee_cli.errors import JournalError
from emceepee_cli.events import EVENTS_KEPT, Events
from emceepee_cli.questions.host_link import HostLink
from emceepee_cli.questions.questions import Questions
from emceepee_cli.runtime import Runtime
from emceepee_cli.session import activity
from emceepee_cli.session.backend_sink import HostViews, SessionSink
from emceepee_cli.session.direct import Direct
from emceepee_cli.session.native_lists import Native
from emceepee_cli.session.native_rounds import NativeRounds
from emceepee_cli.session.pool import Pool
from emceepee_cli.session.registry import Registry
from emceepee_cli.session.roots import Roots
from emceepee_cli.session.roots_round import RootsRound
from emceepee_cli.session.server_changes import ServerChanges
from emceepee_cli.session.servers import Servers
from emceepee_cli.session.watcher import Watcher
from emceepee_cli.shared import Shared
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.records import Event

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inherited:
    """What a starting `serve` takes over from dead ones: suspended calls, undelivered events."""

    calls: list[str] = field(default_factory=list[str])
    events: list[Event] = field(default_factory=list[Event])


async def take_over(
    journal: AsyncJournal, instance_id: str, previous: str | None = None, in_fleet: bool = False
) -> Inherited:
    """Register this instance and settle what dead ones left; what it inherits (`previous`: only
    what that dead instance left, the session its host had in a fleet that died; `in_fleet`: a
    fleet session, which leaves a dead fleet's sessions a minute for their hosts to come back).

    A journal that cannot be written here (a full disk) is logged, and `serve` runs anyway:
    its backends answer; what it cannot journal is not kept. So is one whose rows this emceepee
    cannot read (damage SQLite does not see, store/unreadable.py): `serve` answers whatever the
    journal holds.
    """
    try:
        await journal.run(journal.sync.instances.register, instance_id)
        interrupted = await journal.run(journal.sync.instances.interrupt_orphans)
        if interrupted:
            log.warning("marked %d task(s) of stopped emceepee processes as interrupted", len(interrupted))
        # once; before anything else uses the file
        if await journal.run(journal.sync.retention.convert_to_incremental):
            log.info("journal: switched to incremental vacuum, so purged space goes back to the disk")
        calls = await journal.run(journal.sync.instances.adopt_orphans, instance_id, previous, in_fleet)
    except Exception as exc:  # noqa: BLE001  # see _not_taken_over
        _not_taken_over(exc)
        return Inherited()
    try:  # apart: calls this process has claimed must be re-driven whatever happens here
        events = await journal.run(journal.sync.events.claim, instance_id, EVENTS_KEPT, previous, in_fleet)
    except Exception as exc:  # noqa: BLE001  # see _not_taken_over
        _not_taken_over(exc)
        events = []
    return Inherited(calls, events)


def _not_taken_over(exc: Exception) -> None:
    """Log why part of the take-over failed. Not only a JournalError: a row in a shape nobody
    checked for (a damaged journal) must cost what it held, never `serve`'s answer to the host."""
    if isinstance(exc, JournalError):
        log.error("journal: %s", exc)
    else:
        log.error("journal: a row could not be read while taking over from stopped processes", exc_info=exc)


@dataclass(frozen=True)
class Services:
    shared: Shared  # the journal, events, runtime, [defaults], instance id (also by name, below)
    registry: Registry  # which backends run: start, stop, reload, look one up
    servers: Servers  # the meta-tools about them: list_servers, list_tools, execute_tool…
    changes: ServerChanges  # the model's add_server / remove_server, through the approval gate
    tasks: Tasks
    questions: Questions
    heard: Heard
    host: HostLink
    native: Native
    direct: Direct
    roots: Roots
    watcher: Watcher
    descendants: Descendants

    @property
    def journal(self) -> AsyncJournal:
        return self.shared.journal

    @property
    def events(self) -> Events:
        return self.shared.events

    @property
    def runtime(self) -> Runtime:
        return self.shared.runtime

    @property
    def defaults(self) -> Defaults:
        return self.shared.defaults

    @property
    def instance_id(self) -> str:
        return self.shared.instance_id

    def __repr__(self) -> str:
        return f"<Services {self.instance_id} {self.registry!r} {self.tasks!r} {self.events!r}>"

    async def start(self, inherited: Inherited) -> None:
        """Start every configured backend, the watcher and the leftover reaper (never waiting for
        any); then take up what dead instances left: their events, their suspended calls."""
        self.registry.start_all()
        self.runtime.spawn(self.watcher.run, name="journal watcher")
        self.runtime.spawn(self.descendants.run, name="descendants watcher")
        self.runtime.spawn(leftovers.reap_async, self.journal, name="leftover reaper")
        self.events.replay(inherited.events)
        await self.tasks.adopt(inherited.calls)

    def stop(self, why: str = "it was told to stop") -> None:
        """Stop the watcher and every backend; calls still running end as interrupted, saying `why`."""
        self.watcher.stop()
        self.descendants.stop()
        self.changes.stop()
        self.tasks.stop_all(why)
        self.registry.stop_all()

    async def await_activity(self, timeout_ms: int, since_event_id: str | None = None) -> dict[str, Any]:
        return await activity.await_activity(
            self.events, self.tasks, self.questions, timeout_ms, self.defaults.max_wait_ms, since_event_id
        )


def build(
    config: Config,
    task_group: anyio.abc.TaskGroup,
    journal: AsyncJournal,
    instance_id: str,
    log_dir: Path | None = None,
    launch: Launch | None = None,
    pool: Pool | None = None,
) -> Services:
    """The parts of one host's session. `launch`: it is one of the fleet's sessions, whose backends
    start in that host's environment and cwd (backends/launch.py), and which shares its process;
    `pool`: the fleet's backends, which its sessions share (session/pool.py)."""
    defaults = config.defaults
    backends: dict[str, Backend] = {}
    runtime = Runtime(task_group)
    events = Events(instance_id, journal, runtime)
    heard = Heard()  # notifications and logs, for get_notifications and get_logs
    host = HostLink()

    def policy(server: str, kind: str) -> Policy:
        backend = backends.get(server)
        return forwarding_policy(backend.spec if backend else None, defaults, kind)

    shared = Shared(journal, events, runtime, defaults, instance_id)
    questions = Questions(shared, policy=policy, host=host, log=heard.log)
    roots = Roots(defaults, host, runtime, lambda: list(backends.values()), launch)
    tasks = Tasks(
        shared, questions, backends=backends.get, install_key=_install_key(), roots=roots.for_backend
    )
    questions.on_waiting(tasks.askers.question_arrived)
    held = NativeRounds(
        questions, runtime, tasks.install_key, instance_id, lambda b: roots.for_backend(b.spec)
    )
    native = Native(backends, host, runtime, held, peers=lambda backend: _peers(pool, backend, sink))
    direct = Direct(backends, defaults, host, runtime)
    descendants = Descendants(journal, runtime, instance_id, alone=launch is None)
    views = HostViews(native=native, direct=direct, roots=roots)
    sink = SessionSink(shared, heard, questions, tasks, views=views, descendants=descendants, launch=launch)
    registry = Registry(
        config,
        runtime,
        sink=sink,
        backends=backends,
        direct=direct,
        log_dir=log_dir,
        launch=launch,
        pool=None if pool is None else (pool, sink),
    )
    return Services(
        shared=shared,
        registry=registry,
        servers=Servers(
            registry,
            heard,
            tasks,
            direct=direct,
            roots_round=RootsRound(roots, tasks.install_key, instance_id),
        ),
        changes=ServerChanges(registry, questions, shared),
        tasks=tasks,
        questions=questions,
        heard=heard,
        host=host,
        native=native,
        direct=direct,
        roots=roots,
        watcher=Watcher(shared, tasks, questions),
        descendants=descendants,
    )


def _peers(pool: Pool | None, backend: Backend, sink: SessionSink) -> list[Native]:
    """The other host sessions' lists a backend of the fleet's pool serves (none in-process)."""
    if pool is None:
        return []
    return [user.native for user in pool.users_of(backend) if user is not sink and user.native is not None]


def _install_key() -> bytes:
    """The install key; one that cannot be used does not stop serve: it signs with a key of its own,
    which a restart forgets (tokens it handed out then stop working; the tasks stay in the journal)."""
    try:
        return seal.install_key()
    except (seal.InstallKeyError, OSError) as exc:
        log.error(
            "%s This serve signs its tokens with a key of its own until it restarts. %s",
            getattr(exc, "message", exc),
            getattr(exc, "hint", ""),
        )
        return secrets.token_bytes(seal.KEY_BYTES)
