"""Requests that are valid JSON yet carry what nothing can hold — a lone surrogate, nesting past
the limit — and backends that answer with such things, over a real `emceepee serve`: every
request gets its answer, naming what was wrong, and serve goes on serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli.server.host_input import MAX_DEPTH
from tests.e2e.test_host_wire import LineHost, line_host
from tests.support import hostile_table, write_config

pytestmark = pytest.mark.anyio

INVALID_PARAMS = -32602
REPLY_BOUND_S = 10.0  # one answer on a loaded machine; the host's own timeout is a minute or more


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", '[defaults]\nexpose = "both"\n', hostile_table("h"))


async def begin(host: LineHost) -> None:
    """As a host begins: the handshake, the tool list, the servers, then a normal call."""
    await host.initialize_as("2025-11-25")
    await host.send("tools/list")
    while True:  # until the backend is listed (each listing waits a little for it)
        listed = await host.send("tools/call", {"name": "list_tools", "arguments": {"server": "h"}})
        if "tools" in listed["structuredContent"]["servers"][0]:
            break
    await host.send("tools/call", {"name": "list_servers", "arguments": {}})
    await still_serving(host)


async def still_serving(host: LineHost) -> None:
    """A ping, a meta-tool and a backend call (by both names) are answered as usual."""
    with anyio.fail_after(REPLY_BOUND_S):
        assert await host.send("ping") == {}
        task = await host.send("tools/call", {"name": "list_tasks", "arguments": {}})
        assert "tasks" in task["structuredContent"], task
        for name, arguments in (
            ("execute_tool", {"server": "h", "tool": "echo", "args": {"text": "fine é"}}),
            ("h__echo", {"text": "fine é"}),
        ):
            echoed = await host.send("tools/call", {"name": name, "arguments": arguments})
            assert echoed["content"][0]["text"] == "fine é", echoed


DEEP = "@deep@"  # in a test's params: where `answer` puts its `deep` arrays (json.dumps stops near 1000)


async def answer(host: LineHost, request_id: str, method: str, params: dict[str, Any], deep: int = 0) -> Any:
    """Send one request as a host would write it (a lone surrogate as its `\\uXXXX` escape, DEEP as
    `deep` arrays one inside another); its answer, within the bound."""
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    line = line.replace(json.dumps(DEEP), "[" * deep + '"bottom"' + "]" * deep)
    await host.raw(line.encode() + b"\n")
    with anyio.fail_after(REPLY_BOUND_S):
        return (await host.until_id(request_id))[-1]


def refused(reply: Any, field: str, what: str) -> None:
    assert reply.get("error", {}).get("code") == INVALID_PARAMS, reply
    message = reply["error"]["message"]
    assert message.startswith(f"Invalid params: {field}") and what in message, message


async def test_a_lone_surrogate_in_any_request_is_refused_naming_its_field(config: Path) -> None:
    lone = "\ud800"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("tools/call", {"name": "get_task", "arguments": {"task_id": lone}}, "params.arguments.task_id"),
        (
            "tools/call",
            {"name": "list_tools", "arguments": {"pattern": "\udfff"}},
            "params.arguments.pattern",
        ),
        (  # what the fast lane takes: it used to reach the backend and come back as its fault
            "tools/call",
            {"name": "execute_tool", "arguments": {"server": "h", "tool": "echo", "args": {"text": lone}}},
            "params.arguments.args.text",
        ),
        ("tools/call", {"name": "h__echo", "arguments": {"text": "a" + lone}}, "params.arguments.text"),
        ("tools/call", {"name": "list_tools", "arguments": {lone: 1}}, "a key in params.arguments"),
        ("prompts/get", {"name": "p", "arguments": {"a": lone}}, "params.arguments.a"),
        ("resources/read", {"uri": "file:///" + lone}, "params.uri"),
    ]
    async with line_host(config) as host:
        with anyio.fail_after(60):
            await begin(host)
        for n, (method, params, field) in enumerate(cases):
            reply = await answer(host, f"bad-{n}", method, params)
            refused(reply, field, "unpaired UTF-16 surrogate")
            await still_serving(host)
        # A surrogate written raw in UTF-8 (which Python's json reads) is refused alike.
        raw = b'{"jsonrpc": "2.0", "id": "raw", "method": "tools/call", "params": {"name": "get_task", '
        await host.raw(raw + b'"arguments": {"task_id": "\xed\xa0\x80"}}}\n')
        with anyio.fail_after(REPLY_BOUND_S):
            refused((await host.until_id("raw"))[-1], "params.arguments.task_id", "surrogate")
        # A well-formed pair is text, and goes through.
        paired = await answer(
            host, "pair", "tools/call", {"name": "h__echo", "arguments": {"text": "\U0001f600"}}
        )
        assert paired["result"]["content"][0]["text"] == "\U0001f600", paired
        await still_serving(host)


DEEP_CASES: list[tuple[str, dict[str, Any], str]] = [  # every path a request takes, fast lane included
    (
        "tools/call",
        {"name": "execute_tool", "arguments": {"server": "h", "tool": "echo", "args": {"extra": DEEP}}},
        "params.arguments.args.extra[0]…",
    ),
    ("tools/call", {"name": "h__echo", "arguments": {"text": DEEP}}, "params.arguments.text[0][0]…"),
    ("tools/call", {"name": "list_tools", "arguments": {"pattern": DEEP}}, "params.arguments.pattern"),
    ("tools/call", {"name": "get_task", "arguments": {"task_id": DEEP}}, "params.arguments.task_id"),
    ("prompts/get", {"name": "p", "arguments": {"a": DEEP}}, "params.arguments.a"),
    ("resources/read", {"uri": DEEP}, "params.uri"),
    ("ping", {"_meta": {"x": DEEP}}, "params._meta.x"),
]


async def test_a_request_nested_past_the_limit_is_refused_naming_its_field(config: Path) -> None:
    async with line_host(config) as host:
        with anyio.fail_after(60):
            await begin(host)
        # params (1), arguments (2), args (3): MAX_DEPTH - 3 arrays in args.extra is the most allowed.
        for levels in (MAX_DEPTH - 3, MAX_DEPTH - 2):
            args = {"text": "x", "extra": DEEP}
            params = {"name": "execute_tool", "arguments": {"server": "h", "tool": "echo", "args": args}}
            reply = await answer(host, f"edge-{levels}", "tools/call", params, deep=levels)
            if levels == MAX_DEPTH - 3:
                assert reply["result"]["content"][0]["text"] == "x", reply
            else:
                refused(reply, "params.arguments.args.extra[0]…", f"nested more than {MAX_DEPTH} levels")
        for levels in (MAX_DEPTH, 150, 200, 5000):
            for n, (method, params, field) in enumerate(DEEP_CASES):
                reply = await answer(host, f"deep-{levels}-{n}", method, params, deep=levels)
                refused(reply, field, f"nested more than {MAX_DEPTH} levels deep")
            await still_serving(host)


@pytest.mark.parametrize("fast_lane", ["1", "0"])
async def test_a_backend_answer_no_parser_can_read_fails_its_call_with_the_reason(
    config: Path, fast_lane: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone surrogate or 200-deep nesting in a backend's answer: the SDK's parser refuses the
    line, which used to leave the call waiting for ever (or fail it with an internal error)."""
    monkeypatch.setenv("EMCEEPEE_FAST_LANE", fast_lane)
    async with line_host(config) as host:
        with anyio.fail_after(60):
            await begin(host)
        for n, (tool, args, why) in enumerate(
            [
                ("lone_surrogate", {"where": "text"}, "hex escape"),
                ("lone_surrogate", {"where": "structured"}, "hex escape"),
                ("deep", {"levels": 200}, "recursion limit"),
                ("deep", {"levels": 50_000}, "recursion limit"),
            ]
        ):
            for name, arguments in (
                ("execute_tool", {"server": "h", "tool": tool, "args": args}),
                (f"h__{tool}", args),
            ):
                reply = await answer(
                    host, f"{tool}-{n}-{name}", "tools/call", {"name": name, "arguments": arguments}
                )
                result = reply["result"]
                assert result["isError"] is True, reply
                text = result["content"][0]["text"]
                assert f"tools/call '{tool}'" in text and "could not be read" in text and why in text, text
                # emceepee's refusal at the pipe, never worded as the backend's own error answer
                assert text.startswith("emceepee refused backend 'h's answer") and "-32603" not in text, text
            await still_serving(host)
