"""The hub: the set of running backends and what every meta-tool does with them.

The upstream server's handlers are thin: they validate their own arguments and call one hub
method, which returns a JSON-able payload (our own tools) or the backend's result untouched
(`execute_tool`). Every failure is an `EmceepeeError` that says what to do next.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from emceepee_cli import config as config_mod
from emceepee_cli.config import Config, ConfigProblem, Policy, ServerSpec, forwarding_policy
from emceepee_cli.core import leftovers, patterns, sagas, schema, transport
from emceepee_cli.core.answers import backend_reply
from emceepee_cli.core.backend import Backend, Status
from emceepee_cli.core.calls import Relay
from emceepee_cli.core.events import Events
from emceepee_cli.core.heard import (
    LOG_LEVELS,  # noqa: F401 - meta_tools reads the levels here
    Heard,
    kept_params,
)
from emceepee_cli.core.host import HostLink
from emceepee_cli.core.questions import Questions
from emceepee_cli.core.runtime import Runtime
from emceepee_cli.core.tasks import Tasks
from emceepee_cli.errors import EmceepeeError, NotFound, UsageError
from emceepee_cli.redact import redact, redact_data
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.instances import heartbeat_s
from emceepee_cli.store.journal import Journal

log = logging.getLogger(__name__)

READY_WAIT_S = 10.0  # a call to a backend that is still starting waits this long for it
STOP_WAIT_S = transport.STOP_BOUND_S + 2.0
WATCH_INTERVAL_S = 0.1  # how soon a cancel or an answer written by the CLI is noticed
PURGE_EVERY_S = 3600.0


def dump(model: Any) -> dict[str, Any]:
    """An SDK model as our snake_case JSON (without the SDK's own `result_type` marker)."""
    out: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    out.pop("result_type", None)
    return out


class Hub:
    def __init__(
        self,
        config: Config,
        task_group: anyio.abc.TaskGroup,
        journal: AsyncJournal,
        instance_id: str,
        log_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.task_group = task_group
        self.journal = journal
        self.instance_id = instance_id
        self.log_dir = log_dir
        self.backends: dict[str, Backend] = {}
        self.heard = Heard()  # notifications and logs, for get_notifications and get_logs
        self.runtime = Runtime(task_group)
        self.events = Events(instance_id, journal, self.runtime)
        self.host = HostLink()
        self.questions = Questions(
            journal,
            self.events,
            self.runtime,
            config.defaults,
            instance_id,
            policy=self._policy,
            host=self.host,
            log=self.heard.log,
        )
        self.tasks = Tasks(
            journal,
            self.events,
            self.questions,
            self.runtime,
            config.defaults,
            instance_id,
            backends=self.backends.get,
            install_key=sagas.install_key(),
        )
        self.questions.on_waiting(self.tasks.question_arrived)
        self._watcher = anyio.CancelScope()

    def __repr__(self) -> str:
        return f"<Hub {self.instance_id} backends={list(self.backends)} {self.tasks!r} {self.events!r}>"

    # ---- lifecycle -------------------------------------------------------------------------

    def start_all(self) -> None:
        """Start every configured backend concurrently, and the watcher; never waits for any."""
        for spec in self.config.servers.values():
            self._start(spec)
        self.spawn(self._watch, name="journal watcher")
        self.spawn(leftovers.reap_async, self.journal, name="leftover reaper")

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        self.runtime.spawn(fn, *args, name=name)

    async def guarded(self, work: Callable[[], Awaitable[Any]]) -> None:
        await self.runtime.guarded(work)

    def journal_failed(self, exc: EmceepeeError) -> None:
        self.runtime.journal_failed(exc)

    async def _watch(self) -> None:
        """Keep the journal file, heartbeat, notice changes made by others (CLI cancels and answers,
        a sweep that took this process for dead), expire, purge."""
        with self._watcher:
            state: dict[str, Any] = {
                "version": None,
                "beat": anyio.current_time(),
                "purge": anyio.current_time(),
            }
            while True:
                await self.guarded(lambda: self._tick(state))
                await anyio.sleep(WATCH_INTERVAL_S)

    async def _tick(self, state: dict[str, Any]) -> None:
        now = anyio.current_time()
        recreated = await self.journal.run(Journal.recover)
        if recreated:
            log.error("journal: %s", recreated)
        current = await self.journal.run(Journal.data_version)
        if current != state["version"]:  # another process wrote: a CLI cancel or answer, perhaps
            state["version"] = current
            await self._reclaim()
            await self.tasks.cancel_requested()
            await self.questions.sync()
        await self.tasks.expire_due()
        await self.questions.expire_due()
        if now - state["beat"] >= heartbeat_s():
            state["beat"] = now
            await self.journal.run(Journal.heartbeat, self.instance_id)
        if now - state["purge"] >= PURGE_EVERY_S:
            state["purge"] = now
            await self.journal.run(Journal.purge_finished, self.config.defaults.retention_s)

    async def _reclaim(self) -> None:
        """Take back this process's calls and questions that another process settled, believing it
        had stopped (an older emceepee, or a CLI on another machine, going by a stale heartbeat)."""
        calls = self.tasks.promoted()
        asked = self.questions.unanswered()
        if not calls and not asked:
            return
        restored = await self.journal.run(Journal.reclaim, self.instance_id, calls, asked)
        if restored:
            log.warning(
                "journal: another process marked %d call(s)/question(s) of this running emceepee (pid %d) "
                "as interrupted, taking it for stopped; they are working again: %s",
                len(restored),
                os.getpid(),
                ", ".join(restored),
            )

    def _start(self, spec: ServerSpec) -> Backend:
        backend = Backend(spec, self, self.log_dir)
        self.backends[spec.name] = backend
        self.spawn(backend.run, name=f"backend {spec.name}")
        return backend

    def stop_all(self) -> None:
        self._watcher.cancel()
        self.tasks.stop_all()
        for backend in self.backends.values():
            backend.stop()

    # ---- BackendSink ------------------------------------------------------------------------

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        """Kept for get_notifications and emitted as an event; a repeat is counted, not kept again."""
        params, encoded = kept_params(redact_data(params))
        self.heard.notification(server, method, params)
        key = f"{server}\0{method}\0{encoded}"
        self.events.emit("notification", server, {"method": method, "params": params}, coalesce=key)

    def log(self, server: str, level: str, message: str, source: str) -> None:
        self.heard.log(server, level, message, source)

    def _policy(self, server: str, kind: str) -> Policy:
        backend = self.backends.get(server)
        return forwarding_policy(backend.spec if backend else None, self.config.defaults, kind)

    def spawned(self, backend: Backend, process: transport.ProcessInfo) -> None:
        """Journal the process, so a later emceepee can stop it should this one die without doing so."""
        if process.start_time is not None:
            start = process.start_time
            self.runtime.write(
                self.journal, Journal.add_spawned, self.instance_id, backend.name, process.pid, start
            )

    def ended(self, backend: Backend, process: transport.ProcessInfo) -> None:
        if process.returncode is not None:
            self.runtime.write(self.journal, Journal.forget_spawned, self.instance_id, process.pid)

    async def question(self, backend: Backend, kind: str, params: Any) -> Any:
        """A handshake-era backend asks mid-call: park (and maybe forward) it, return the answer."""
        calls = self.tasks.in_flight(backend.name)
        task_id, correlation = (calls[0].call_id, "sole") if len(calls) == 1 else (None, "server")
        dumped = params.model_dump(mode="json", exclude_none=True)
        try:
            question = await self.questions.ask(
                backend.name, kind, dumped, task_id=task_id, correlation=correlation
            )
        except EmceepeeError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=exc.message)
        return backend_reply(await self.questions.wait(question))

    def status_changed(self, backend: Backend, previous: Status) -> None:
        if backend.last_error:  # e.g. a missing `cwd`, quoted as expanded: show its ${VAR} form
            backend.last_error = redact(backend.last_error)
        detail = f": {backend.last_error}" if backend.last_error and backend.status != Status.READY else ""
        self.log(backend.name, "info", f"{previous} -> {backend.status}{detail}", "emceepee")
        if detail:  # the host's log of our stderr is often the only place a person looks
            log.warning("backend %s: %s -> %s%s", backend.name, previous, backend.status, detail)
        kind = _SERVER_EVENTS.get((previous, backend.status)) or _SERVER_EVENTS.get((None, backend.status))
        if kind:
            data = {
                "status": backend.status.value,
                **({"error": backend.last_error} if backend.last_error else {}),
            }
            self.events.emit(kind, backend.name, data)

    # ---- looking things up ------------------------------------------------------------------

    def backend(self, name: str) -> Backend:
        backend = self.backends.get(name)
        if backend is None:
            broken = [p for p in self.config.problems if p.server == name]
            if broken:
                raise NotFound(
                    f"Server '{name}' is in the config but could not load: {_config_error(broken)}",
                    hint="Fix the config.",
                )
            known = ", ".join(sorted(self.backends)) or "none"
            raise NotFound(
                f"Unknown server '{name}'. Known: {known}.",
                hint=f"Add it with add_server, or in a terminal: emceepee servers add {name} -- <command> [args…]",
            )
        return backend

    async def ready(self, name: str) -> Backend:
        backend = self.backend(name)
        await backend.wait_ready(READY_WAIT_S)
        backend.require_session()
        return backend

    async def _selected(self, server: str | None) -> list[Backend]:
        """One named backend, or all of them, after a bounded wait for any still starting."""
        chosen = [self.backend(server)] if server else list(self.backends.values())
        with anyio.move_on_after(READY_WAIT_S):
            for backend in chosen:
                await backend.wait_ready(READY_WAIT_S)
        return chosen

    # ---- servers -------------------------------------------------------------------------

    def list_servers(self) -> dict[str, Any]:
        servers = [_server_row(b) for b in self.backends.values()]
        broken: dict[str, list[ConfigProblem]] = {}
        for problem in self.config.problems:
            if problem.server and problem.server not in self.backends:
                broken.setdefault(problem.server, []).append(problem)
        servers += [
            {
                "name": name,
                "status": Status.FAILED.value,
                "transport": None,
                "tools": 0,
                "restarts": 0,
                "last_error": _config_error(problems),
            }
            for name, problems in broken.items()
        ]
        out: dict[str, Any] = {"servers": servers}
        general = [str(p) for p in self.config.problems if not p.server]
        if general:
            out["config_problems"] = general
        return out

    async def add_server(self, spec: ServerSpec, persist: bool) -> dict[str, Any]:
        if spec.name in self.backends:
            raise UsageError(
                f"Server '{spec.name}' already exists.",
                hint=f"Remove it first with remove_server('{spec.name}').",
            )
        if persist:  # in a thread: the file lock may be held by a CLI for a moment
            await anyio.to_thread.run_sync(config_mod.add_server, spec, self.config.path)
        else:
            config_mod.check_spec(spec)
        backend = self._start(spec)
        await backend.wait_ready(READY_WAIT_S)
        row = _server_row(backend)
        row["persisted"] = persist
        return row

    async def remove_server(self, name: str) -> dict[str, Any]:
        backend = self.backend(name)
        backend.stop()
        await backend.wait_for(lambda s: s in (Status.STOPPED, Status.FAILED, Status.DISABLED), STOP_WAIT_S)
        del self.backends[name]
        removed_from_config = await anyio.to_thread.run_sync(
            config_mod.discard_server, name, self.config.path
        )
        return {"removed": name, "status": backend.status.value, "removed_from_config": removed_from_config}

    # ---- tools -------------------------------------------------------------------------------

    async def list_tools(self, server: str | None, pattern: str | None) -> dict[str, Any]:
        if pattern:
            patterns.compile_pattern(pattern)  # a bad pattern is refused before any wait for backends
        groups = []
        for backend in await self._selected(server):
            group: dict[str, Any] = {"server": backend.name, "status": backend.status.value}
            if backend.status != Status.READY:
                group["error"] = backend.last_error or f"backend is {backend.status}"
            else:
                group["tools"] = [
                    {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                    for t in backend.offer.tools.values()
                ]
            groups.append(group)
        if pattern:  # in a thread, bounded: a pattern that backtracks must not stall the event loop
            listed = [tool for group in groups for tool in group.get("tools", ())]
            texts = [(tool["name"], tool["description"]) for tool in listed]
            found = await anyio.to_thread.run_sync(patterns.matching, pattern, texts)
            kept = {id(tool) for tool, hit in zip(listed, found, strict=True) if hit}
            for group in groups:
                if "tools" in group:
                    group["tools"] = [tool for tool in group["tools"] if id(tool) in kept]
        return {"servers": groups}

    async def execute_tool(
        self,
        server: str,
        tool: str,
        args: dict[str, Any] | None,
        timeout_ms: int | None = None,
        relay: Relay | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """The backend's result if it comes within `timeout_ms`; else the task it became."""
        backend = await self.ready(server)
        spec = await backend.tool(tool)
        wrong = schema.problems(args or {}, spec.input_schema)
        if wrong:
            raise UsageError(
                f"Arguments for {server}.{tool} do not match its input schema:\n- " + "\n- ".join(wrong),
                hint=f"Nothing was sent to '{server}'. Fix the fields named; list_tools(server='{server}') shows the schema.",
            )
        return await self.tasks.execute(backend, tool, args, timeout_ms, relay)

    # ---- activity -------------------------------------------------------------------------

    def pending_client(self) -> dict[str, Any]:
        """Category 4: questions from backends awaiting an answer (empty when there are none)."""
        return self.questions.for_client()

    async def await_activity(self, timeout_ms: int) -> dict[str, Any]:
        if self.events.waiting():
            triggers: list[dict[str, Any]] = [{"type": "immediate"}]
        else:
            await self.events.wait(min(timeout_ms, self.config.defaults.max_wait_ms) / 1000)
            triggers = []
        events = self.events.take()
        if not triggers:
            seen = {(e["type"], e["server"]) for e in events}
            triggers = [
                {"type": "event", "event_type": t, "server": srv} for t, srv in sorted(seen, key=str)
            ] or [{"type": "timeout"}]
        return {
            "triggers": triggers,
            "events": events,
            "pending_server": self.tasks.working(),
            "pending_client": {"elicitations": [], "sampling_requests": [], **self.pending_client()},
        }

    # ---- resources and prompts -------------------------------------------------------------

    async def list_resources(self, server: str | None) -> dict[str, Any]:
        groups = []
        for backend in await self._selected(server):
            groups.append(
                {
                    "server": backend.name,
                    "status": backend.status.value,
                    "resources": [dump(r) for r in backend.offer.resources],
                    "resource_templates": [dump(t) for t in backend.offer.templates],
                }
            )
        return {"servers": groups}

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        backend = await self.ready(server)
        return await backend.request(f"resources/read '{uri}'", lambda s: s.read_resource(uri))

    async def list_prompts(self, server: str | None) -> dict[str, Any]:
        groups = []
        for backend in await self._selected(server):
            prompts = [dump(p) for p in backend.offer.prompts.values()]
            groups.append({"server": backend.name, "status": backend.status.value, "prompts": prompts})
        return {"servers": groups}

    async def get_prompt(self, server: str, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
        backend = await self.ready(server)
        if name not in backend.offer.prompts:
            known = ", ".join(sorted(backend.offer.prompts)) or "none"
            raise NotFound(
                f"Backend '{server}' has no prompt '{name}'. Known: {known}.",
                hint=f"See list_prompts(server='{server}').",
            )
        result = await backend.request(f"prompts/get '{name}'", lambda s: s.get_prompt(name, arguments))
        return dump(result)

    # ---- what backends said -------------------------------------------------------------

    def get_notifications(self, server: str | None, limit: int) -> dict[str, Any]:
        if server:
            self.backend(server)
        return self.heard.notifications_of(server, limit)

    def get_logs(self, server: str | None, level: str | None, limit: int) -> dict[str, Any]:
        if server:
            self.backend(server)
        return self.heard.logs_of(server, level, limit)


_SERVER_EVENTS: dict[tuple[Status | None, Status], str] = {
    (Status.STARTING, Status.READY): "server_connected",
    (Status.RESTARTING, Status.READY): "server_restarted",
    (Status.READY, Status.RESTARTING): "server_disconnected",
    (None, Status.FAILED): "server_failed",
}


def _config_error(problems: list[ConfigProblem]) -> str:
    """Every problem of one server's table, in one line."""
    parts = [f"field '{p.field}': {p.message}" if p.field else p.message for p in problems]
    return "config: " + "; ".join(parts)


def _server_row(backend: Backend) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": backend.name,
        "status": backend.status.value,
        "transport": backend.spec.transport,
        "tools": len(backend.offer.tools),
        "restarts": backend.restarts,
    }
    if backend.last_error:
        row["last_error"] = backend.last_error
    if backend.pid:
        row["pid"] = backend.pid
    return row
