"""The narrow parts the core's objects are built from, real ones: a journal file, a task group."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.backends.process import ProcessInfo
from emceepee_cli.config import Defaults, Policy, ServerSpec
from emceepee_cli.events import Events
from emceepee_cli.questions.host_link import HostLink
from emceepee_cli.questions.questions import Questions
from emceepee_cli.runtime import Runtime
from emceepee_cli.shared import Shared
from emceepee_cli.signin.flow import Nobody
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.journal import Journal
from tests.support import EXAMPLES, HOSTILE

INSTANCE = "01INSTANCE"


@dataclass
class Parts:
    journal: Journal  # the same file, for the test to read and write as another process would
    aio: AsyncJournal
    runtime: Runtime
    events: Events
    shared: Shared  # what every part of a serve stands on: the journal, events, runtime, defaults, id
    questions: Questions
    logged: list[tuple[str, str, str]] = field(default_factory=list)  # (server, level, message)
    waiting: list[tuple[str, str | None]] = field(default_factory=list)  # questions announced


@asynccontextmanager
async def parts(
    tmp_path: Path, defaults: Defaults | None = None, policy: Policy = "auto"
) -> AsyncIterator[Parts]:
    """Questions (and what they stand on) on a real journal, in a real task group; no server."""
    path = tmp_path / "journal.db"
    own = Journal(path)
    own.instances.register(INSTANCE)
    aio = AsyncJournal(own)
    async with anyio.create_task_group() as tg:
        runtime = Runtime(tg)
        events = Events(INSTANCE, aio, runtime)
        logged: list[tuple[str, str, str]] = []
        waiting: list[tuple[str, str | None]] = []

        def log(server: str, level: str, message: str, source: str) -> None:
            logged.append((server, level, message))

        shared = Shared(aio, events, runtime, defaults or Defaults(), INSTANCE)
        questions = Questions(shared, policy=lambda server, kind: policy, host=HostLink(), log=log)
        questions.on_waiting(lambda server, task_id: waiting.append((server, task_id)))
        built = Parts(Journal(path), aio, runtime, events, shared, questions, logged, waiting)
        try:
            yield built
        finally:
            tg.cancel_scope.cancel()


class Sink:
    """What a backend reports, kept for the test; its questions are refused (none are asked here)."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []
        self.sign_in = Nobody()

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        self.heard.append(("notification", method))

    def log(self, server: str, level: str, message: str, source: str) -> None:
        self.heard.append(("log", message))

    def status_changed(self, backend: Backend, previous: Status) -> None:
        self.heard.append(("status", backend.status.value))

    async def question(
        self,
        backend: Backend,
        kind: str,
        params: types.ElicitRequestParams | types.CreateMessageRequestParams,
    ) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="no questions in this test")

    async def roots_of(self, backend: Backend) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    def relisted(self, backend: Backend, listed: str) -> None:
        self.heard.append(("relisted", backend.name))

    def spawned(self, backend: Backend, process: ProcessInfo) -> None:
        self.heard.append(("spawned", str(process.pid)))

    def ended(self, backend: Backend, process: ProcessInfo) -> None:
        self.heard.append(("ended", str(process.pid)))


def example(name: str, script: str, record: Path | None = None, **extra: Any) -> ServerSpec:
    """A backend running one of examples/servers/ with this Python."""
    env = {"EMCEEPEE_EXAMPLE_LOG": str(record)} if record else {}
    return ServerSpec(name, command=sys.executable, args=(str(EXAMPLES / script),), env=env, **extra)


def hostile(name: str, *flags: str) -> ServerSpec:
    """A backend running tests/backends/hostile.py (stdlib only: it starts in a fraction of a second)."""
    return ServerSpec(name, command=sys.executable, args=(str(HOSTILE), *flags))


async def started(p: Parts, *specs: ServerSpec) -> dict[str, Backend]:
    """The backends, running in the parts' task group, each ready (bounded)."""
    backends = {spec.name: Backend(spec, Sink()) for spec in specs}
    for backend in backends.values():
        p.runtime.spawn(backend.run, name=f"backend {backend.name}")
    with anyio.fail_after(30):
        for backend in backends.values():
            await backend.wait_ready(30)
    return backends
