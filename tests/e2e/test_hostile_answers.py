"""The host's answers to what serve asks it (a forwarded elicitation or sampling request, roots/list),
and the entries of a batch, holding what nothing can carry — a lone surrogate, nesting past the
limit — over a real `emceepee serve`: the question is parked at once with an event naming the
field, roots fall back to the configured ones, each bad batch entry gets its own error; nothing
waits for a timeout, and serve goes on serving."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli.server.host_input import MAX_DEPTH
from emceepee_cli.session.roots import HOST_ROOTS_TIMEOUT_S
from tests.e2e.test_host_wire import LineHost, line_host
from tests.e2e.test_hostile_requests import DEEP, refused
from tests.support import example_table, write_config

pytestmark = pytest.mark.anyio

SETTLED_BOUND_S = 10.0  # a bad answer to a parked question, on a loaded machine (the old wait: 10 min)
READY_BOUND_S = 60.0  # serve and its backend started, on a loaded machine
SURROGATE = "unpaired UTF-16 surrogate"
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"

OnRequest = Callable[[dict[str, Any]], Awaitable[None]]


def line_of(message: Any, deep: int = 0) -> bytes:
    """A message as a host would write it: a lone surrogate as its `\\uXXXX` escape, DEEP as `deep`
    arrays one inside another (json.dumps stops near 1000)."""
    line = json.dumps(message).replace(json.dumps(DEEP), "[" * deep + '"bottom"' + "]" * deep)
    return line.encode() + b"\n"


class AnsweringHost:
    """A host at the line level that answers serve's own requests (as `on_request` says) whenever
    they arrive, while it waits for the replies to its requests (string ids: serve's are numbers)."""

    def __init__(self, line: LineHost, on_request: OnRequest) -> None:
        self.line = line
        self.on_request = on_request
        self.asked: list[str] = []  # the methods of serve's requests, in order
        self.parse_errors: list[dict[str, Any]] = []  # what a bad answer used to get: -32700, id null

    async def initialize(self, capabilities: dict[str, Any]) -> None:
        client = {"name": "answering-host", "version": "0"}
        params = {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": client}
        await self.call("init", "initialize", params)
        await self.line.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its reply, serve's requests meanwhile answered."""
        await self.line.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = await self.line.message()
            if "method" in message and "id" in message:
                self.asked.append(message["method"])
                await self.on_request(message)
            elif message.get("id") is None and "error" in message:
                self.parse_errors.append(message)
            elif message.get("id") == request_id:
                return dict(message)

    async def tool(self, request_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call's result (asserted to be one)."""
        reply = await self.call(request_id, "tools/call", {"name": name, "arguments": arguments})
        assert "result" in reply, reply
        return dict(reply["result"])

    async def begin(self, server: str) -> None:
        """As a host begins: the tool list, the servers, and the backend's tools once it is up."""
        await self.call("tools", "tools/list", {})
        await self.tool("servers", "list_servers", {})
        for n in range(10_000):  # each listing waits a little for the backend
            listed = await self.tool(f"list-{n}", "list_tools", {"server": server})
            if "tools" in listed["structuredContent"]["servers"][0]:
                break
        await self.tool("tasks", "list_tasks", {})


def answer(request: dict[str, Any], result: dict[str, Any], deep: int = 0) -> bytes:
    return line_of({"jsonrpc": "2.0", "id": request["id"], "result": result}, deep)


async def refused_event(host: AnsweringHost, reply: dict[str, Any]) -> dict[str, Any]:
    """The host_answer_refused event, from the reply that brought the question back or after it."""
    events = reply["structuredContent"].get("events_since_last_response", [])
    n = 0
    while not (found := [e for e in events if e["type"] == "host_answer_refused"]):
        n += 1
        activity = await host.tool(f"activity-{n}", "await_activity", {"timeout_ms": 2000})
        events = activity["structuredContent"]["events"]
    [event] = found
    return dict(event)


def config_with(tmp_path: Path, table: str, defaults: str = "") -> Path:
    return write_config(tmp_path / "config.toml", f"[defaults]\n{defaults}", table)


BAD_FORMS: list[tuple[dict[str, Any], str, str]] = [  # an elicitation's answer, what the event says
    (
        {"result": {"action": "accept", "content": {"name": "Bo\ud800"}}},
        "the host's answer could not be used: result.content.name",
        SURROGATE,
    ),
    ({"result": "accept"}, "the host's answer could not be used", "'result' must be an object"),
    (
        {"result": {"action": "maybe"}},
        "the host's answer is not a valid elicitation result: result.action",
        "accept",
    ),
    (
        {"error": {"code": -1, "message": "no \udc00 form"}},
        "the host's answer could not be used: error.message",
        SURROGATE,
    ),
]


async def test_a_forwarded_elicitation_the_host_answers_unreadably_is_parked_at_once(
    tmp_path: Path,
) -> None:
    log = tmp_path / "backend.log"
    config = config_with(
        tmp_path, example_table("elicit", "elicit.py", env={"EMCEEPEE_EXAMPLE_LOG": str(log)})
    )
    bad_answers = iter(BAD_FORMS)

    async def form(request: dict[str, Any]) -> None:
        assert request["method"] == "elicitation/create", request
        await host.line.raw(line_of({"jsonrpc": "2.0", "id": request["id"], **next(bad_answers)[0]}))

    async with line_host(config) as line:
        host = AnsweringHost(line, form)
        with anyio.fail_after(READY_BOUND_S):
            await host.initialize({"elicitation": {"form": {}}})
            await host.begin("elicit")
        for n, (_, field, what) in enumerate(BAD_FORMS):
            with anyio.fail_after(SETTLED_BOUND_S):
                args = {
                    "server": "elicit",
                    "tool": "ask",
                    "args": {"question": "Name?"},
                    "timeout_ms": 40_000,
                }
                promoted = (await host.tool(f"ask-{n}", "execute_tool", args))["structuredContent"]
                task_id = promoted["proxy_task"]["task_id"]
                event = await refused_event(host, {"structuredContent": promoted})
                listed = await host.tool(f"listed-{n}", "get_elicitations", {})
            [question] = listed["structuredContent"]["elicitations"]
            assert event["data"]["request_id"] == question["request_id"], event
            assert event["data"]["task_id"] == task_id, event
            assert field in event["data"]["error"] and what in event["data"]["error"], event
            with anyio.fail_after(SETTLED_BOUND_S):
                given = {
                    "request_id": question["request_id"],
                    "action": "accept",
                    "content": {"name": f"Bo{n}"},
                }
                await host.tool(f"respond-{n}", "respond_to_elicitation", given)
                result = await host.tool(f"result-{n}", "get_task_result", {"task_id": task_id})
            assert result["content"][0]["text"] == f"hello Bo{n}", result
            assert f'answer {{"action": "accept", "content": {{"name": "Bo{n}"}}}}' in log.read_text()
        assert host.asked == ["elicitation/create"] * len(BAD_FORMS)
        assert host.parse_errors == []  # each answer was taken for what it was, not a stray line


async def test_a_sampling_answer_nested_past_the_limit_is_parked_at_once(tmp_path: Path) -> None:
    config = config_with(tmp_path, example_table("sampling", "sampling.py"))
    completion = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}
    depths = iter([150, 5000])  # one the SDK's parser reads (past ours), one it refuses

    async def sample(request: dict[str, Any]) -> None:
        assert request["method"] == "sampling/createMessage", request
        deep = {**completion, "_meta": {"deep": DEEP}}
        await host.line.raw(answer(request, deep, next(depths)))

    async with line_host(config) as line:
        host = AnsweringHost(line, sample)
        with anyio.fail_after(READY_BOUND_S):
            await host.initialize({"sampling": {}})
            await host.begin("sampling")
        for n in range(2):
            with anyio.fail_after(SETTLED_BOUND_S):
                args = {
                    "server": "sampling",
                    "tool": "summarize",
                    "args": {"text": "story"},
                    "timeout_ms": 40_000,
                }
                promoted = (await host.tool(f"sum-{n}", "execute_tool", args))["structuredContent"]
                task_id = promoted["proxy_task"]["task_id"]
                event = await refused_event(host, {"structuredContent": promoted})
                listed = await host.tool(f"listed-{n}", "get_sampling_requests", {})
            [question] = listed["structuredContent"]["sampling_requests"]
            assert event["data"]["request_id"] == question["request_id"]
            assert "result._meta.deep[0][0]…" in event["data"]["error"], event
            assert TOO_DEEP in event["data"]["error"], event
            with anyio.fail_after(SETTLED_BOUND_S):
                given = {"request_id": question["request_id"], "content": "short", "model": "m"}
                await host.tool(f"respond-{n}", "respond_to_sampling", given)
                result = await host.tool(f"result-{n}", "get_task_result", {"task_id": task_id})
            assert result["content"][0]["text"] == "summary: short", result
        assert host.asked == ["sampling/createMessage"] * 2 and host.parse_errors == []


async def test_a_roots_answer_no_one_can_read_leaves_the_configured_roots_at_once(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    config = config_with(tmp_path, example_table("r", "roots.py"), f"roots = [{json.dumps(str(shared))}]\n")
    configured = [{"uri": shared.resolve().as_uri(), "name": "shared"}]
    bad_answers: Iterator[tuple[dict[str, Any], int]] = iter(
        [  # a lone surrogate (the SDK's parser refuses it), then a root beside nesting it reads
            ({"roots": [{"uri": "file:///elsewhere", "name": "x\udc00"}]}, 0),
            ({"roots": [{"uri": "file:///elsewhere"}], "_meta": {"deep": DEEP}}, 150),
        ]
    )

    async def roots(request: dict[str, Any]) -> None:
        assert request["method"] == "roots/list", request
        result, deep = next(bad_answers)
        await host.line.raw(answer(request, result, deep))

    async with line_host(config) as line:
        host = AnsweringHost(line, roots)
        with anyio.fail_after(READY_BOUND_S):
            await host.initialize({"roots": {"listChanged": True}})
            await host.begin("r")
        list_roots = {"server": "r", "tool": "list_roots"}
        for n in range(2):
            with anyio.fail_after(READY_BOUND_S):
                m = 0
                while len(host.asked) == n:  # asked once, as the backend comes up or when it asks
                    m += 1
                    await host.tool(f"roots-{n}-{m}", "execute_tool", list_roots)
            # Settled by the answer itself, long before the host's roots/list would time out.
            with anyio.fail_after(HOST_ROOTS_TIMEOUT_S / 2):
                listed = await host.tool(f"again-{n}", "execute_tool", list_roots)
            assert listed["structuredContent"]["roots"] == configured, listed
            assert host.asked == ["roots/list"] * (n + 1) and host.parse_errors == []
            if n == 0:  # the host says its roots changed: asked again, and again refused
                await host.line.write({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})


async def test_each_bad_entry_of_a_batch_gets_its_own_error_and_the_good_ones_their_answers(
    tmp_path: Path,
) -> None:
    config = config_with(tmp_path, example_table("echo", "echo.py"))
    good: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": "ping", "method": "ping"},
        {"jsonrpc": "2.0", "id": "servers", "method": "tools/call", "params": {"name": "list_servers"}},
    ]
    lone = {"name": "list_tools", "arguments": {"pattern": "\ud800"}}
    nested = {"_meta": {"x": DEEP}}
    async with line_host(config) as host:
        with anyio.fail_after(READY_BOUND_S):
            assert (await host.initialize_as("2025-03-26"))["protocolVersion"] == "2025-03-26"
            await host.send("tools/list")
            await host.send("tools/call", {"name": "list_servers", "arguments": {}})
        for deep in (150, 5000):  # what the SDK's parser reads (past our limit), and what it refuses
            bad: list[dict[str, Any]] = [
                {"jsonrpc": "2.0", "id": "lone", "method": "tools/call", "params": lone},
                {"jsonrpc": "2.0", "id": "deep", "method": "ping", "params": nested},
            ]
            for entries in ([good[0], bad[1]], [bad[0], good[1]], [*bad, *good]):
                with anyio.fail_after(SETTLED_BOUND_S):
                    [replies] = await host.after(line_of(entries, deep))
                by_id = {reply["id"]: reply for reply in replies}
                assert sorted(by_id) == sorted(entry["id"] for entry in entries), replies
                if "lone" in by_id:
                    refused(by_id["lone"], "params.arguments.pattern", SURROGATE)
                if "deep" in by_id:
                    refused(by_id["deep"], "params._meta.x[0]", TOO_DEEP)
                if "ping" in by_id:
                    assert by_id["ping"]["result"] == {}, replies
                if "servers" in by_id:
                    assert by_id["servers"]["result"]["structuredContent"]["servers"][0]["name"] == "echo"
        listing = await host.send("tools/call", {"name": "list_servers", "arguments": {}})
        assert listing["structuredContent"]["servers"][0]["name"] == "echo"
