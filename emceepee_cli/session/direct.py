"""Direct exposure: a backend's tools on the host's own tools/list as `server__tool`.

Under `expose = "direct"` or `"both"` (per server, else `[defaults]`), each tool of a connected
backend is also a host tool, named by session/names.py within `[defaults] direct_name_max`. A call to
one is an `execute_tool` call in every respect (schema check, promotion to a task, questions,
errors). The listed tool keeps the backend's title, description, input schema and annotations;
its output schema is left out, because the call may come back as an emceepee task handle instead
(a host would reject that against the backend's output schema). Every direct tool may run as a
task of the protocol's own (server/native_tasks.py): its `execution.taskSupport` is `optional`,
or `required` when the backend requires it (a plain call still works: emceepee runs it). The host
hears tools/list_changed whenever the set of listed names changes: a backend connects, goes, or
re-lists its tools.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.calls import policy
from emceepee_cli.config import Defaults, exposure
from emceepee_cli.questions.host_link import HostLink
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.names import name_table

log = logging.getLogger(__name__)

LISTED = (Status.READY, Status.RESTARTING)  # a backend restarting keeps its names meanwhile
START_WAIT_S = 10.0  # how long a call to a name not (yet) listed waits for exposed backends to start


class Direct:
    def __init__(
        self, backends: dict[str, Backend], defaults: Defaults, host: HostLink, runtime: Runtime
    ) -> None:
        self.backends = backends
        self.defaults = defaults
        self.host = host
        self.runtime = runtime
        self.announced: frozenset[str] = frozenset()  # the names the host last heard of

    def __repr__(self) -> str:
        return f"<Direct {len(self.announced)} tools>"

    def exposed(self, backend: Backend) -> bool:
        return exposure(backend.spec, self.defaults) != "meta"

    def only_direct(self, backend: Backend) -> bool:
        """Its tools are listed directly only, not by list_tools as well."""
        return exposure(backend.spec, self.defaults) == "direct"

    @property
    def any(self) -> bool:
        return any(self.exposed(b) for b in self.backends.values())

    def table(self) -> dict[str, tuple[str, str]]:
        """exposed name -> (server, tool), in config order then each backend's listing order."""
        chosen = [b for b in self.backends.values() if b.status in LISTED and self.exposed(b)]
        pairs = ((b.name, tool) for b in chosen for tool in b.offer.tools if policy.visible(b.spec, tool))
        return name_table(pairs, self.defaults.direct_name_max)

    def names_of(self, server: str) -> dict[str, str]:
        """tool -> exposed name, for one server (list_tools shows the mapping)."""
        return {tool: exposed for exposed, (owner, tool) in self.table().items() if owner == server}

    def annotate(self, backend: Backend, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """list_tools' entries for one backend, each with its name on the host's tools/list; under
        `expose = "direct"` only names and descriptions (the full listing is there already)."""
        if not self.exposed(backend):
            return tools
        names = self.names_of(backend.name)
        if self.only_direct(backend):
            tools = [{"name": t["name"], "description": t["description"]} for t in tools]
        return [{**t, "direct_name": names[t["name"]]} if t["name"] in names else t for t in tools]

    def resolve(self, name: str) -> tuple[str, str] | None:
        return self.table().get(name)

    async def resolve_started(self, name: str) -> tuple[str, str] | None:
        """`resolve`, once the exposed backends still starting have started (bounded): a host that
        calls a name it knows (from an earlier session, or the conformance suite) at once after
        connecting finds the tool rather than "no tool", as `execute_tool` waits for its backend."""
        found = self.resolve(name)
        with anyio.move_on_after(START_WAIT_S):
            for backend in [b for b in self.backends.values() if self.exposed(b)]:
                if found is not None:
                    break
                await backend.wait_ready(START_WAIT_S, want=False)
                found = self.resolve(name)
        return found

    def tools(self) -> list[types.Tool]:
        table = self.table()
        self.announced = frozenset(table)
        listed = []
        for exposed, (server, name) in table.items():
            tool = self.backends[server].offer.tools[name]
            listed.append(
                types.Tool(
                    name=exposed,
                    title=tool.title,
                    description=tool.description or f"{name} on {server}",
                    input_schema=tool.input_schema,
                    annotations=tool.annotations,
                    icons=tool.icons,
                    execution=types.ToolExecution(task_support=_task_support(tool)),
                )
            )
        return listed

    def changed(self) -> None:
        """A backend came, went or re-listed: tell the host if the names it knows changed."""
        current = frozenset(self.table())
        if current == self.announced:
            return
        self.announced = current
        if self.host.session is not None and self.host.can_send():
            self.runtime.spawn(self._send, name="host tools/list_changed")

    async def _send(self) -> None:
        assert self.host.session is not None
        try:
            await self.host.session.send_notification(types.ToolListChangedNotification())
        except Exception as exc:  # noqa: BLE001 - the host may be gone; it re-lists when it comes back
            log.debug("could not send tools/list_changed to the host: %r", exc)


def _task_support(tool: types.Tool) -> Literal["optional", "required"]:
    """A backend tool that requires a task keeps saying so; any other may run as one (emceepee's)."""
    required = tool.execution is not None and tool.execution.task_support == "required"
    return "required" if required else "optional"
