"""The meta-tools about servers and what they offer: the backends in session/registry.py, as
the model sees them.

`Servers` answers list_servers, list_tools, execute_tool (admitted first: calls/admission.py;
then run as a call that may become a task: calls/tasks.py), list_resources, read_resource,
list_prompts, get_prompt, get_notifications and get_logs. It holds no backend of its own: which
exist, and starting, stopping or reloading them, is the registry's.

Every failure is an `EmceepeeError` that says what to do next.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio
import mcp_types as types

from emceepee_cli import patterns
from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.backends.listing import dump, tool_json
from emceepee_cli.backends.notifications import Heard
from emceepee_cli.calls import admission, policy
from emceepee_cli.calls.call import CallAnswer, Relay
from emceepee_cli.calls.host_rounds import HostRetry
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.config import ConfigProblem
from emceepee_cli.errors import NotFound
from emceepee_cli.session.direct import Direct
from emceepee_cli.session.registry import READY_WAIT_S, Registry, config_error
from emceepee_cli.session.roots_round import RootsRound

LISTING_WAIT_S = 2.0  # list_tools(server=…) of a backend still starting: a short wait, then its status


class Servers:
    def __init__(
        self,
        registry: Registry,
        heard: Heard,
        tasks: Tasks,
        *,
        direct: Direct | None = None,
        roots_round: RootsRound | None = None,
    ) -> None:
        self.registry = registry
        self.heard = heard
        self.tasks = tasks
        self.direct = direct  # backend tools on the host's own tools/list
        self.roots_round = roots_round  # a 2026-07-28 host's roots, asked before its call

    def __repr__(self) -> str:
        return f"<Servers {list(self.registry.backends)}>"

    # ---- servers -------------------------------------------------------------------------

    def list_servers(self) -> dict[str, Any]:
        config = self.registry.config
        servers = [server_row(b) for b in self.registry.backends.values()]
        broken: dict[str, list[ConfigProblem]] = {}
        for problem in config.problems:
            if problem.server and problem.server not in self.registry.backends:
                broken.setdefault(problem.server, []).append(problem)
        servers += [
            {
                "name": name,
                "status": Status.FAILED.value,
                "transport": None,
                "tools": 0,
                "restarts": 0,
                "last_error": config_error(problems),
            }
            for name, problems in broken.items()
        ]
        out: dict[str, Any] = {"servers": servers}
        general = [str(p) for p in config.problems if not p.server]
        if general:
            out["config_problems"] = general
        return out

    # ---- tools -------------------------------------------------------------------------------

    async def list_tools(self, server: str | None, pattern: str | None) -> dict[str, Any]:
        if pattern:
            patterns.compile_pattern(pattern)  # a bad pattern is refused before any wait for backends
        groups = []
        # One named backend still starting: its status is the answer, after a short wait only.
        for backend in await self.registry.selected(server, LISTING_WAIT_S if server else READY_WAIT_S):
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
        asks: types.ClientCapabilities | None = None,
        retry: HostRetry | None = None,
    ) -> CallAnswer:
        """The backend's result if it comes within `timeout_ms`; else the task it became. A backend
        still starting is waited for as part of the call, so that wait too becomes a task.

        `follow_next_tool`, `auto_resume` and `resume_token` are the call's own (calls/chain.py);
        `fast`: it came by the fast lane (calls/raw_step.py). `asks`: what a 2026-07-28 host's request
        can answer (its questions then come back as input rounds); with `retry`, this request is that
        host's retry with a round's answers, which goes on with the call it came from
        (calls/host_rounds.py) and starts nothing. A 2026-07-28 host may first be asked its roots, in
        a round of their own (session/roots_round.py); its retry with them starts the call."""
        rounds = self.roots_round if asks is not None else None
        if rounds is not None and retry is not None and rounds.answers(retry):
            rounds.take(retry, server, tool, args)
            retry = None
        if retry is not None and asks is not None:
            return await self.tasks.continued(server, tool, args, timeout_ms, relay, retry=retry, asks=asks)
        backend = self.registry.backend(server)
        policy.refuse_denied(backend.spec, tool)  # at once, even while the backend starts
        if rounds is not None and asks is not None and (round_ := rounds.offer(server, tool, args, asks)):
            return round_
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
            asks=asks,
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
        for backend in await self.registry.selected(server):
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
        backend = await self.registry.ready(server)
        return await backend.request(f"resources/read '{uri}'", lambda s: s.read_resource(uri))

    async def list_prompts(self, server: str | None) -> dict[str, Any]:
        groups = []
        for backend in await self.registry.selected(server):
            prompts = [dump(p) for p in backend.offer.prompts.values()]
            groups.append({"server": backend.name, "status": backend.status.value, "prompts": prompts})
        return {"servers": groups}

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        backend = await self.registry.ready(server)
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
            self.registry.backend(server)
        return self.heard.notifications_of(server, limit)

    def get_logs(self, server: str | None, level: str | None, limit: int) -> dict[str, Any]:
        if server:
            self.registry.backend(server)
        return self.heard.logs_of(server, level, limit)


def server_row(backend: Backend) -> dict[str, Any]:
    """One backend as list_servers (and add_server) show it."""
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
