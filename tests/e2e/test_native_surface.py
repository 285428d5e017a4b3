"""The host's own MCP lists over the real `serve`: backend prompts as server__prompt, resources and
templates with their URIs, completion, subscribe/updated and logging/setLevel reach the backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import example_table, hostile_table, next_event, serving, texts, until_ready, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    env = {"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "backend.log")}
    return write_config(tmp_path / "config.toml", example_table("surface", "surface.py", env=env))


async def ready(client: Client) -> None:
    """As a host does: list tools, then see the servers; wait until the backend is connected."""
    await until_ready(client, "surface")


async def call(client: Client, tool: str, args: dict[str, Any]) -> list[str]:
    return texts(await client.call_tool("execute_tool", {"server": "surface", "tool": tool, "args": args}))


async def test_prompts_templates_and_completion_reach_the_backend(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await ready(client)
            prompts = await client.list_prompts()
            templates = await client.list_resource_templates()
            resources = await client.list_resources()
            review = types.PromptReference(name="surface__review")
            languages = await client.complete(review, {"name": "language", "value": "py"})
            frameworks = await client.complete(
                review, {"name": "framework", "value": "f"}, {"language": "python"}
            )
            prompt = await client.get_prompt("surface__review", {"language": "python", "framework": "flask"})
            counter = await client.read_resource("surface://counter")
    assert [p.name for p in prompts.prompts] == ["surface__review"]
    assert [p.name for p in prompts.prompts[0].arguments or []] == ["language", "framework"]
    [template] = templates.resource_templates
    assert template.uri_template == "surface://notes/{name}" and template.name.startswith("surface: ")
    uris = [str(r.uri) for r in resources.resources]
    assert "emceepee://diagrams" in uris and "surface://counter" in uris
    assert languages.completion.values[:1] == ["python"]
    assert frameworks.completion.values == ["fastapi", "flask"]
    [message] = prompt.messages
    assert isinstance(message.content, types.TextContent) and "python" in message.content.text
    assert isinstance(counter.contents[0], types.TextResourceContents) and counter.contents[0].text == "0"


async def test_subscribe_updated_and_set_level_pass_through(config: Path) -> None:
    heard: list[str] = []
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with serving(config, message_handler=on_message, logging_callback=on_log) as client:
        with anyio.fail_after(60):
            await ready(client)
            await client.subscribe_resource("surface://counter")
            bumped = await call(client, "bump", {})
            await client.set_logging_level("error")
            filtered = await call(client, "log", {"level": "warning", "message": "quiet"})
            sent = await call(client, "log", {"level": "error", "message": "loud"})
            while not heard or not logs:  # notifications ride the same pipe, just after the replies
                await client.send_ping()
    assert bumped == ["1"] and heard == ["surface://counter"]
    assert filtered == ["filtered"] and sent == ["sent"]
    assert [(entry.level, entry.logger, entry.data) for entry in logs] == [
        ("error", "surface", "surface: loud")
    ]


async def test_a_backend_that_connects_later_gets_the_level_the_host_set(
    config: Path, tmp_path: Path
) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await ready(client)
            await client.set_logging_level("error")
            env = {"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "later.log")}
            write_config(  # the user adds a server while serve runs: it is started on reload
                config,
                example_table(
                    "surface", "surface.py", env={"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "backend.log")}
                ),
                example_table("later", "surface.py", env=env),
            )
            await next_event(client, "config_reloaded")
            await until_ready(client, "later")
            later = {"server": "later", "tool": "log", "args": {"level": "warning", "message": "quiet"}}
            filtered = texts(await client.call_tool("execute_tool", later))
    assert filtered == ["filtered"]  # it was told the host's level when it connected


async def test_the_host_hears_list_changed_once_the_new_list_can_be_read(tmp_path: Path) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    config = write_config(tmp_path / "config.toml", hostile_table("hostile"))
    async with serving(config, message_handler=on_message) as client:
        with anyio.fail_after(60):
            await until_ready(client, "hostile")
            args = {"name": "late", "list_delay_s": 0.5}  # a backend slow to list its prompts again
            await client.call_tool("execute_tool", {"server": "hostile", "tool": "add_prompt", "args": args})
            await changed.wait()
            prompts = await client.list_prompts()  # a host lists again at once
    assert [p.name for p in prompts.prompts] == ["hostile__late"]
