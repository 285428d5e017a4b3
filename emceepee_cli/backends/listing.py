"""What a backend offers: its full listing, and re-listing when it says the list changed.

A listing walks every page (a repeated cursor ends the walk); a listing the backend does not
implement is empty. A `list_changed` storm is absorbed by `Refreshes`: per kind, at most one
re-listing runs and one more is queued, however many notifications arrive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.abc
import mcp_types as types
from mcp import ClientSession, MCPError
from pydantic import BaseModel

MAX_PAGES = 1000
LIST_TIMEOUT_S = 30.0  # one whole listing (every page of every kind), or one re-listing


@dataclass
class Offer:
    """What a backend offered at its last listing."""

    tools: dict[str, types.Tool] = field(default_factory=dict)
    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: dict[str, types.Prompt] = field(default_factory=dict)


async def list_offer(session: ClientSession) -> Offer:
    caps = session.server_capabilities or types.ServerCapabilities()
    offer = Offer()
    if caps.tools is not None:
        await refresh_tools(offer, session)
    if caps.resources is not None:
        await refresh_resources(offer, session)
    if caps.prompts is not None:
        await refresh_prompts(offer, session)
    return offer


async def refresh_tools(offer: Offer, session: ClientSession) -> None:
    offer.tools = {t.name: t for t in await _all_pages(session.list_tools, "tools")}


async def refresh_resources(offer: Offer, session: ClientSession) -> None:
    offer.resources = await _all_pages(session.list_resources, "resources")
    offer.templates = await _all_pages(session.list_resource_templates, "resource_templates")


async def refresh_prompts(offer: Offer, session: ClientSession) -> None:
    offer.prompts = {p.name: p for p in await _all_pages(session.list_prompts, "prompts")}


Refresher = Callable[[Offer, ClientSession], Awaitable[None]]

LISTS: dict[Refresher, str] = {
    refresh_tools: "tools",
    refresh_resources: "resources",
    refresh_prompts: "prompts",
}

REFRESHERS: dict[type, Refresher] = {
    types.ToolListChangedNotification: refresh_tools,
    types.ResourceListChangedNotification: refresh_resources,
    types.PromptListChangedNotification: refresh_prompts,
}


class Refreshes:
    """The re-listings one connection runs, at most one running and one queued per kind."""

    def __init__(self, task_group: anyio.abc.TaskGroup, run: Callable[[Refresher], Awaitable[None]]) -> None:
        self._task_group = task_group
        self._run = run
        self._queued: dict[Refresher, bool] = {}  # running kinds: is another re-listing wanted after it?

    def __repr__(self) -> str:
        return f"<Refreshes running={len(self._queued)} queued={sum(self._queued.values())}>"

    def ask(self, refresh: Refresher) -> None:
        if refresh in self._queued:
            self._queued[refresh] = True
            return
        self._queued[refresh] = False
        self._task_group.start_soon(self._while_asked, refresh)

    async def _while_asked(self, refresh: Refresher) -> None:
        try:
            while True:
                self._queued[refresh] = False
                await self._run(refresh)
                if not self._queued[refresh]:
                    return
        finally:
            del self._queued[refresh]


async def _all_pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Every page of one listing; a listing the backend does not implement is empty."""
    try:
        return await _walk_pages(fetch, attr)
    except MCPError as exc:
        if exc.code == types.METHOD_NOT_FOUND:
            return []
        raise


async def _walk_pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(params=types.PaginatedRequestParams(cursor=cursor))
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor or cursor in seen:  # a repeated cursor would loop forever
            break
        seen.add(cursor)
    return items


def dump(model: BaseModel) -> dict[str, Any]:
    """An SDK model as our snake_case JSON (without the SDK's own `result_type` marker)."""
    out: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    out.pop("result_type", None)
    return out


def tool_json(tool: types.Tool) -> dict[str, Any]:
    """A backend tool as list_tools shows it: what a model needs to choose and call it safely
    (its title, its hints such as destructive or read-only, its output schema, and whether it runs
    as a task), with nothing left empty."""
    out: dict[str, Any] = {"name": tool.name}
    if tool.title:
        out["title"] = tool.title
    out["description"] = tool.description or ""
    out["input_schema"] = tool.input_schema
    if tool.output_schema:
        out["output_schema"] = tool.output_schema
    if tool.annotations is not None and (hints := dump(tool.annotations)):
        out["annotations"] = hints
    support = tool.execution.task_support if tool.execution is not None else None
    if support and support != "forbidden":
        out["task_support"] = support
    return out
