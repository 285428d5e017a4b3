"""resources/subscribe and resources/unsubscribe for URIs no backend lists, over the real `serve`:
with one backend they go to it; with several, to the one backend the URI's template, its scheme
or a declared `resources.subscribe` singles out; a URI more than one could take is refused, naming
them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support import (
    example_table,
    refusal,
    rpc_errors_table,
    serving,
    text_of,
    texts,
    until_ready,
    write_config,
)

pytestmark = [
    pytest.mark.anyio,
    # a handshake-era host's ping and resources/subscribe, deprecated as of 2026-07-28
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def as_a_host_begins(client: Client, *servers: str) -> None:
    """List first and read a resource, as a host does before it subscribes."""
    await until_ready(client, *servers)
    resources = await client.list_resources()
    await client.list_resource_templates()
    first = next(r for r in resources.resources if str(r.uri).startswith(("err:", "surface:")))
    await client.read_resource(str(first.uri))


async def test_with_one_backend_a_uri_it_does_not_list_is_subscribed_on_it(tmp_path: Path) -> None:
    events = tmp_path / "errs.events"
    config = write_config(tmp_path / "config.toml", rpc_errors_table("errs", "--events", str(events)))
    async with serving(config) as client:
        with anyio.fail_after(60):
            await as_a_host_begins(client, "errs")
            await client.subscribe_resource("err://listed")
            await client.subscribe_resource("other://not/listed")
            await client.unsubscribe_resource("other://not/listed")
            await client.unsubscribe_resource("never://subscribed")  # a subscription of an earlier session
            listed = await client.read_resource("err://listed")
    assert lines(events) == [
        "subscribed err://listed",
        "subscribed other://not/listed",
        "unsubscribed other://not/listed",
        "unsubscribed never://subscribed",
    ]
    assert text_of(listed.contents[0]) == "listed"


async def test_of_two_backends_the_scheme_or_template_picks_one_and_an_ambiguous_uri_is_refused(
    tmp_path: Path,
) -> None:
    surface_log, events = tmp_path / "surface.log", tmp_path / "errs.events"
    config = write_config(
        tmp_path / "config.toml",
        example_table("surface", "surface.py", env={"EMCEEPEE_EXAMPLE_LOG": str(surface_log)}),
        rpc_errors_table("errs", "--events", str(events)),
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            await as_a_host_begins(client, "surface", "errs")
            await client.subscribe_resource("err://not/listed")  # its scheme: errs
            await client.subscribe_resource("surface://elsewhere")  # its scheme: surface
            await client.subscribe_resource("err://fail/7")  # errs's template
            ambiguous = await refusal(client.subscribe_resource("other://x"))
            unknown_unsubscribe = await refusal(client.unsubscribe_resource("other://y"))
            await client.unsubscribe_resource("err://not/listed")
            await client.unsubscribe_resource("surface://elsewhere")
            bumped = await client.call_tool("execute_tool", {"server": "surface", "tool": "bump", "args": {}})
    assert lines(events) == [
        "subscribed err://not/listed",
        "subscribed err://fail/7",
        "unsubscribed err://not/listed",
    ]
    assert lines(surface_log) == ["subscribed surface://elsewhere", "unsubscribed surface://elsewhere"]
    assert ambiguous.code == -32602
    assert "'other://x'" in ambiguous.message and "surface, errs" in ambiguous.message, ambiguous.message
    assert unknown_unsubscribe.code == -32602 and "surface, errs" in unknown_unsubscribe.message
    assert texts(bumped) == ["1"]


async def test_backends_sharing_a_scheme_are_told_apart_only_by_subscribe_support(tmp_path: Path) -> None:
    one, two, quiet = tmp_path / "one.events", tmp_path / "two.events", tmp_path / "quiet.events"
    config = write_config(
        tmp_path / "config.toml",
        rpc_errors_table("one", "--events", str(one)),
        rpc_errors_table("two", "--events", str(two)),
        rpc_errors_table("quiet", "--scheme", "q", "--no-subscribe", "--events", str(quiet)),
    )
    async with serving(config) as client:
        with anyio.fail_after(60):
            await as_a_host_begins(client, "one", "two", "quiet")
            same_scheme = await refusal(client.subscribe_resource("err://not/listed"))
            no_scheme = await refusal(client.subscribe_resource("zzz://x"))
            await client.subscribe_resource("q://not/listed")  # its scheme names it, subscribe or not
            await client.subscribe_resource("err://listed")  # listed by both: the first lister's
    assert "one, two" in same_scheme.message and "quiet" not in same_scheme.message
    assert "one, two" in no_scheme.message and "quiet" not in no_scheme.message  # it takes none
    assert lines(quiet) == ["subscribed q://not/listed"]
    assert lines(one) == ["subscribed err://listed"] and lines(two) == []
