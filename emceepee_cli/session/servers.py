"""The backends `serve` runs, and the meta-tools that reach them.

`Servers` keeps the registry (one supervised `Backend` per configured server, plus those added
at run time, each reporting what it hears to session/backend_sink.py) and answers the meta-tools about
servers, tools, resources, prompts, logs and notifications.

Every failure is an `EmceepeeError` that says what to do next.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli import config as config_mod
from emceepee_cli import patterns
from emceepee_cli.backends import transport
from emceepee_cli.backends.backend import Backend, BackendSink, Status, StopReason
from emceepee_cli.backends.listing import dump, tool_json
from emceepee_cli.backends.notifications import Heard
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.calls import admission, policy
from emceepee_cli.calls.call import CallAnswer, Relay
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.config import Config, ConfigProblem, ServerSpec, reload
from emceepee_cli.config.reload import Plan
from emceepee_cli.errors import NotFound, UsageError
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.direct import Direct

READY_WAIT_S = 10.0  # a request (not a tool call) to a backend that is still starting waits this long
LISTING_WAIT_S = 2.0  # list_tools(server=…) of a backend still starting: a short wait, then its status
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


class Servers:
    def __init__(
        self,
        config: Config,
        heard: Heard,
        tasks: Tasks,
        runtime: Runtime,
        *,
        hearing: BackendSink,
        backends: dict[str, Backend],
        direct: Direct | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.heard = heard
        self.tasks = tasks
        self.runtime = runtime
        self.hearing = hearing  # what every backend reports to (session/backend_sink.py)
        self.starts = StartSlots()  # how many backends boot at once
        self.backends = backends
        self.direct = direct  # backend tools on the host's own tools/list
        self.log_dir = log_dir
        self.changing = anyio.Lock()  # one change of the set of backends at a time (tools, reload)
        # Each backend's table as the file (or add_server) gave it, before [defaults] add to it: what
        # a reload compares, so a table that did not change never looks changed.
        self.tables: dict[str, ServerSpec] = {}

    def __repr__(self) -> str:
        return f"<Servers {list(self.backends)}>"

    def start_all(self) -> None:
        """Start every configured backend concurrently; never waits for any."""
        for spec in self.config.servers.values():
            self._start(spec)

    def _start(self, spec: ServerSpec) -> Backend:
        self.tables[spec.name] = spec
        if self.config.defaults.pass_env:  # every backend's, then its own
            spec = replace(spec, pass_env=(*self.config.defaults.pass_env, *spec.pass_env))
        backend = Backend(spec, self.hearing, self.log_dir, self.starts)
        self.backends[spec.name] = backend
        self.runtime.spawn(backend.run, name=f"backend {spec.name}")
        return backend

    def stop_all(self) -> None:
        for backend in self.backends.values():
            backend.stop()

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
                hint="Add it with add_server, or in a terminal: "
                f"emceepee servers add {name} -- <command> [args…]",
            )
        return backend

    async def ready(self, name: str) -> Backend:
        backend = self.backend(name)
        await backend.wait_ready(READY_WAIT_S)
        backend.require_session()
        return backend

    async def _selected(self, server: str | None, wait_s: float = READY_WAIT_S) -> list[Backend]:
        """One named backend, or all of them, after a bounded wait for any still starting."""
        chosen = [self.backend(server)] if server else list(self.backends.values())
        with anyio.move_on_after(wait_s):
            for backend in chosen:
                await backend.wait_ready(READY_WAIT_S, want=server is not None)
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

    def check_new(self, spec: ServerSpec) -> None:
        """Refuse a server that cannot be added: its name is taken, or the config could not hold it."""
        if spec.name in self.backends:
            raise UsageError(
                f"Server '{spec.name}' already exists.",
                hint=f"Remove it first with remove_server('{spec.name}').",
            )
        config_mod.check_spec(spec)

    async def add_server(self, spec: ServerSpec, persist: bool) -> dict[str, Any]:
        """Start `spec` (and save it): the change itself, made once allowed (session/server_changes.py)."""
        self.check_new(spec)
        async with self.changing:  # a reload that sees the saved file finds the backend running
            if persist:  # in a thread: the file lock may be held by a CLI for a moment
                await anyio.to_thread.run_sync(config_mod.add_server, spec, self.config.path)
            backend = self._start(spec)
        await backend.wait_ready(READY_WAIT_S)
        row = _server_row(backend)
        row["persisted"] = persist
        return row

    async def remove_server(self, name: str) -> dict[str, Any]:
        self.backend(name)
        async with self.changing:
            backend = await self._retire(name, REMOVED)
        removed_from_config = await anyio.to_thread.run_sync(
            config_mod.discard_server, name, self.config.path
        )
        return {"removed": name, "status": backend.status.value, "removed_from_config": removed_from_config}

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
        backend.stop(why)
        await backend.wait_for(lambda s: s in (Status.STOPPED, Status.FAILED, Status.DISABLED), STOP_WAIT_S)
        self.backends.pop(name, None)
        self.tables.pop(name, None)
        if self.direct is not None:
            self.direct.changed()
        return backend

    # ---- tools -------------------------------------------------------------------------------

    async def list_tools(self, server: str | None, pattern: str | None) -> dict[str, Any]:
        if pattern:
            patterns.compile_pattern(pattern)  # a bad pattern is refused before any wait for backends
        groups = []
        # One named backend still starting: its status is the answer, after a short wait only.
        for backend in await self._selected(server, LISTING_WAIT_S if server else READY_WAIT_S):
            group: dict[str, Any] = {"server": backend.name, "status": backend.status.value}
            if backend.status != Status.READY:
                group["error"] = backend.last_error or f"backend is {backend.status}"
                if backend.starting:
                    group["hint"] = (
                        "list_servers shows when it is ready; execute_tool waits for it meanwhile."
                    )
            else:
                group["tools"] = self._tools_of(backend)
            groups.append(group)
        if pattern:  # in a thread, bounded: a pattern that backtracks must not stall the event loop
            listed = [tool for group in groups for tool in group.get("tools", ())]
            texts = [(tool["name"], tool["description"]) for tool in listed]
            found = await anyio.to_thread.run_sync(patterns.matching, pattern, texts)
            kept = {id(tool) for tool, hit in zip(listed, found, strict=True) if hit}
            for group in groups:
                if "tools" in group:
                    group["tools"] = [tool for tool in group["tools"] if id(tool) in kept]
            groups = [group for group in groups if group.get("tools") or "error" in group]
        return {"servers": groups}

    def _tools_of(self, backend: Backend) -> list[dict[str, Any]]:
        # denied tools are hidden as well as refused
        tools = [tool_json(t) for t in backend.offer.tools.values() if policy.visible(backend.spec, t.name)]
        return tools if self.direct is None else self.direct.annotate(backend, tools)

    async def execute_tool(
        self,
        server: str,
        tool: str,
        args: dict[str, Any] | None,
        timeout_ms: int | None = None,
        relay: Relay | None = None,
        *,
        follow_next_tool: bool | None = None,
        auto_resume: bool | None = None,
        resume_token: str | None = None,
        fast: bool = False,
    ) -> CallAnswer:
        """The backend's result if it comes within `timeout_ms`; else the task it became. A backend
        still starting is waited for as part of the call, so that wait too becomes a task.

        `follow_next_tool`, `auto_resume` and `resume_token` are the call's own (calls/chain.py);
        `fast`: it came by the fast lane (calls/raw_step.py)."""
        backend = self.backend(server)
        policy.refuse_denied(backend.spec, tool)  # at once, even while the backend starts
        check = functools.partial(self._admit, backend, tool, args)
        starting = backend.starting  # then `check` runs once it is up, as part of the call
        if not starting:
            backend.require_session()
            await check()
        return await self.tasks.execute(
            backend,
            tool,
            args,
            timeout_ms,
            relay,
            check if starting else None,
            follow_next_tool=follow_next_tool,
            auto_resume=auto_resume,
            resume_token=resume_token,
            fast=fast,
        )

    async def _admit(self, backend: Backend, tool: str, args: dict[str, Any] | None) -> None:
        """Refuse the call, before anything is sent, as the admission rule says (calls/admission.py)."""
        verdict = await admission.admit(backend, tool, args or {})
        if not isinstance(verdict, admission.Admitted):
            server = backend.name
            hint = f"Nothing was sent to '{server}'. Fix the fields named; "
            hint += f"list_tools(server='{server}') shows the schema."
            raise admission.refused(verdict, schema_hint=hint)

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

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        backend = await self.ready(server)
        if name not in backend.offer.prompts:
            known = ", ".join(sorted(backend.offer.prompts)) or "none"
            raise NotFound(
                f"Backend '{server}' has no prompt '{name}'. Known: {known}.",
                hint=f"See list_prompts(server='{server}').",
            )
        return await backend.request(f"prompts/get '{name}'", lambda s: s.get_prompt(name, arguments))

    # ---- what backends said -------------------------------------------------------------

    def get_notifications(self, server: str | None, limit: int) -> dict[str, Any]:
        if server:
            self.backend(server)
        return self.heard.notifications_of(server, limit)

    def get_logs(self, server: str | None, level: str | None, limit: int) -> dict[str, Any]:
        if server:
            self.backend(server)
        return self.heard.logs_of(server, level, limit)


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
