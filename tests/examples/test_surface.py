"""The "surface" example backend, driven directly: completions, templates, subscribe, log levels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.examples.direct import direct, events
from tests.support import text_of

pytestmark = [
    pytest.mark.anyio,
    # logging/setLevel and resources/subscribe are deprecated in 2026-07-28, current in the handshake era.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


async def test_it_declares_the_whole_surface() -> None:
    async with direct("surface.py") as client:
        with anyio.fail_after(20):
            await client.list_tools()
            caps = client.server_capabilities
            templates = await client.list_resource_templates()
    assert caps.completions is not None and caps.logging is not None
    assert caps.resources is not None and caps.resources.subscribe and caps.resources.list_changed
    assert caps.prompts is not None and caps.prompts.list_changed
    assert [t.uri_template for t in templates.resource_templates] == ["surface://notes/{name}"]


async def test_prompt_and_template_arguments_complete() -> None:
    review = types.PromptReference(name="review")
    notes = types.ResourceTemplateReference(uri="surface://notes/{name}")
    async with direct("surface.py") as client:
        with anyio.fail_after(20):
            await client.list_tools()
            languages = await client.complete(review, {"name": "language", "value": "py"})
            frameworks = await client.complete(
                review, {"name": "framework", "value": "f"}, {"language": "python"}
            )
            await client.call_tool("add_note", {"name": "todo", "text": "buy milk"})
            await client.call_tool("add_note", {"name": "tips", "text": "sleep"})
            names = await client.complete(notes, {"name": "name", "value": "t"})
            prompt = await client.get_prompt("review", {"language": "python", "framework": "flask"})
            note = await client.read_resource("surface://notes/todo")
    assert languages.completion.values == ["python", "pytorch"] and languages.completion.total == 2
    assert frameworks.completion.values == ["fastapi", "flask"]
    assert names.completion.values == ["tips", "todo"]
    assert text_of(prompt.messages[0].content) == "Review this python code using flask."
    assert text_of(note.contents[0]) == "buy milk"


async def test_a_subscriber_hears_of_updates_until_it_unsubscribes(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    updates: list[str] = []
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(message.params.uri)
            heard.set()

    async with direct("surface.py", log, message_handler=on_message) as client:
        with anyio.fail_after(20):
            await client.list_tools()
            await client.call_tool("bump", {})  # nobody subscribed yet
            await client.subscribe_resource("surface://counter")
            bumped = await client.call_tool("bump", {"by": 2})
            await heard.wait()
            await client.unsubscribe_resource("surface://counter")
            await client.call_tool("bump", {})
            value = await client.read_resource("surface://counter")
    assert bumped.structured_content == {"counter": 3}
    assert updates == ["surface://counter"]
    assert text_of(value.contents[0]) == "4"
    assert events(log) == [
        "subscribed surface://counter",
        "updated surface://counter",
        "unsubscribed surface://counter",
    ]


async def test_set_level_filters_log_messages(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    received: list[tuple[str, Any]] = []
    warned = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append((params.level, params.data))
        if params.level == "warning":
            warned.set()

    async with direct("surface.py", log, logging_callback=on_log) as client:
        with anyio.fail_after(20):
            await client.list_tools()
            before = await client.call_tool("log", {"level": "debug", "message": "too quiet"})
            await client.set_logging_level("error")
            quiet = await client.call_tool("log", {"level": "warning", "message": "filtered out"})
            await client.set_logging_level("warning")
            loud = await client.call_tool("log", {"level": "warning", "message": "heard"})
            await warned.wait()
    assert [text_of(before.content[0]), text_of(quiet.content[0]), text_of(loud.content[0])] == [
        "filtered",
        "filtered",
        "sent",
    ]
    assert received == [("warning", "heard")]
    assert events(log) == ["level error", "level warning"]


async def test_adding_notes_and_prompts_announces_list_changes() -> None:
    changed: list[str] = []
    both = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification | types.PromptListChangedNotification):
            changed.append(message.method)
            if len(changed) == 2:
                both.set()

    async with direct("surface.py", message_handler=on_message) as client:
        with anyio.fail_after(20):
            await client.list_tools()
            await client.call_tool("add_note", {"name": "n1", "text": "x"})
            await client.call_tool("add_prompt", {"name": "standup"})
            await both.wait()
            resources = await client.list_resources()
            prompts = await client.list_prompts()
    assert sorted(changed) == ["notifications/prompts/list_changed", "notifications/resources/list_changed"]
    assert [r.uri for r in resources.resources] == ["surface://counter", "surface://notes/n1"]
    assert [p.name for p in prompts.prompts] == ["review", "standup"]
