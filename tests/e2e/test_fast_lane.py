"""The fast lane over the real `emceepee serve`: the host cannot tell it from the slow path.

Each test speaks raw JSON-RPC lines (so it sees the exact bytes, and every progress
notification), calls list_servers first as hosts do, and proves the lane was taken: the
hostile backend's `request_id` tool shows the id the backend received, `ee-fast-N` on the fast
lane, an integer from the SDK session on the slow one (`EMCEEPEE_FAST_LANE=0`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from tests.support import Gate, alive, example_table, hostile_table, serve_command, until, write_config

pytestmark = pytest.mark.anyio

BOUND_S = 30.0


class Host:
    """A host on serve's pipes that keeps every line, so replies and notifications can be checked."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.next_id = 0
        self.lines: list[bytes] = []  # read but not yet claimed by a reply

    async def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        await self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def reply(self, request_id: Any) -> bytes:
        """The raw line answering `request_id` (other lines are kept in `lines`)."""
        while True:
            for i, line in enumerate(self.lines):
                if json.loads(line).get("id") == request_id:
                    return self.lines.pop(i)
            assert self.process.stdout is not None
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
            line, self.buffer = self.buffer.split(b"\n", 1)
            self.lines.append(line)

    async def tool(self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> bytes:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        return await self.reply(await self.request("tools/call", params))

    async def result(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message = json.loads(await self.tool(name, arguments))
        result: dict[str, Any] = message["result"]
        return result

    async def execute(self, server: str, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return await self.result("execute_tool", {"server": server, "tool": tool, "args": args, **extra})

    async def start(self) -> None:
        """Initialize, then list_servers (as hosts do) until every backend is ready."""
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        await self.reply(await self.request("initialize", init))
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        servers = (await self.result("list_servers", {}))["structuredContent"]["servers"]
        for server in servers:
            await self.ready(server["name"])
        await self.result("await_activity", {"timeout_ms": 0})  # the start-up events, delivered

    async def ready(self, server: str) -> None:
        """Until `server` lists its tools: each listing waits a little for a start, so no sleep."""
        while True:
            (group,) = (await self.result("list_tools", {"server": server}))["structuredContent"]["servers"]
            assert group["status"] != "failed", group
            if "tools" in group:
                return


@asynccontextmanager
async def serving_raw(config: Path, fast: bool = True) -> AsyncIterator[Host]:
    env = {**os.environ, "EMCEEPEE_FAST_LANE": "1" if fast else "0"}
    with (config.parent / f"serve-{fast}.stderr").open("w") as errors:
        process = await anyio.open_process(serve_command(config), env=env, stderr=errors)
        try:
            host = Host(process)
            with anyio.fail_after(BOUND_S):
                await host.start()
            yield host
        finally:
            if process.stdin is not None:
                await process.stdin.aclose()
            with anyio.fail_after(BOUND_S):
                await process.wait()
            await process.aclose()


async def logged(log: Path, line: str, times: int) -> None:
    """Until the backend has written `line` to its log `times` times (the caller bounds the wait)."""
    await until(lambda: (log.read_text() if log.exists() else "").count(line) >= times)


def lane_of(result: dict[str, Any]) -> str:
    received = json.loads(result["content"][0]["text"])
    return "fast" if isinstance(received, str) and received.startswith("ee-fast-") else "slow"


def result_bytes(line: bytes) -> bytes:
    """What follows the id: the part of a reply the backend's answer decides."""
    _, sep, rest = line.partition(b',"result":')
    if not sep:
        _, sep, rest = line.partition(b',"error":')
    assert sep, line
    return sep + rest


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Two stdlib backends (compact and spaced JSON) and an SDK one."""
    log = str(tmp_path / "backend.log")
    return write_config(
        tmp_path / "config.toml",
        hostile_table("raw", "--compact"),
        hostile_table("spaced"),
        example_table("echo", "echo.py", env={"EMCEEPEE_EXAMPLE_LOG": log}),
    )


@pytest.fixture
def raw_only(tmp_path: Path) -> Path:
    """One stdlib backend, for tests that need no SDK backend (it starts in a fraction of the time)."""
    return write_config(tmp_path / "config.toml", hostile_table("raw", "--compact"))


CASES = [
    ("raw", "echo", {"text": 'plain é \\ " \n'}),
    ("raw", "shaped", {"kind": "meta"}),
    ("raw", "shaped", {"kind": "canonical"}),
    ("raw", "shaped", {"kind": "extra"}),
    ("raw", "shaped", {"kind": "image"}),
    ("raw", "shaped", {"kind": "error"}),
    ("raw", "shaped", {"kind": "chain"}),
    ("raw", "malformed", {}),
    ("spaced", "echo", {"text": "spaced"}),
    ("spaced", "shaped", {"kind": "meta"}),
    ("spaced", "shaped", {"kind": "error"}),
    ("echo", "echo", {"text": "from the SDK"}),
    ("echo", "fail", {"message": "a tool error"}),
    ("raw", "typed", {"kind": "good"}),
    ("raw", "typed", {"kind": "bad"}),
    ("raw", "typed", {"kind": "missing"}),
    ("raw", "typed", {"kind": "error"}),
]


async def test_results_are_byte_identical_to_the_slow_path(config: Path) -> None:
    replies: dict[bool, list[bytes]] = {}
    for fast in (True, False):
        async with serving_raw(config, fast) as host:
            with anyio.fail_after(BOUND_S):
                assert lane_of(await host.execute("raw", "request_id", {})) == ("fast" if fast else "slow")
                assert lane_of(await host.execute("spaced", "request_id", {})) == ("fast" if fast else "slow")
                replies[fast] = []
                for server, tool, args in CASES:
                    line = await host.tool("execute_tool", {"server": server, "tool": tool, "args": args})
                    replies[fast].append(result_bytes(line))
    for (server, tool, args), on_fast, on_slow in zip(CASES, replies[True], replies[False], strict=True):
        assert on_fast == on_slow, (server, tool, args)
    shown = [json.loads(b"{" + r.lstrip(b",")) for r in replies[True]]
    assert shown[1]["result"]["_meta"] == {"example.com/k": "v"}
    assert shown[1]["result"]["structuredContent"]["list"] == [1, "two", None]
    assert shown[2]["result"]["structuredContent"] == {"z": 1.0, "a": [True, None]}
    failure = shown[5]["result"]
    assert failure["isError"] and "error -32001: shaped failure" in failure["content"][0]["text"]
    assert shown[6]["result"]["_meta"]["nextTool"]["name"] == "echo"
    assert shown[12]["result"]["isError"] is True
    assert shown[13]["result"]["structuredContent"] == {"n": 1}
    for bad in (shown[14], shown[15]):  # the output schema is checked on both lanes alike
        assert bad["result"]["isError"] and "typed" in bad["result"]["content"][0]["text"], bad
    assert shown[16]["result"]["content"][0]["text"] == "failed"


VARYING = re.compile(rb"[0-9A-HJKMNP-TV-Z]{26}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def steady(reply: bytes) -> bytes:
    """A reply's result with what differs between two runs (ids and times) blanked."""
    return VARYING.sub(b"*", result_bytes(reply))


GATED_KINDS = ["", "meta", "canonical", "extra", "image", "empty", "tricky"]


async def test_task_results_are_byte_identical_to_the_slow_path(config: Path, tmp_path: Path) -> None:
    """Calls promoted at once (timeout_ms=0), their results fetched as tasks. A call held by a
    gate until it is a task ends while get_task_result (or execute_tool with the task's own resume
    token) waits for it, so its end is an event the reply carries (the envelope is appended).
    get_task shows its step the same; and every case is fetched again once it is done (nothing
    appended)."""
    replies: dict[bool, list[bytes]] = {}
    for fast in (True, False):
        async with serving_raw(config, fast) as host:
            with anyio.fail_after(BOUND_S):
                assert lane_of(await host.execute("raw", "request_id", {})) == ("fast" if fast else "slow")
                replies[fast] = []
                for n, kind in enumerate(GATED_KINDS * 2):
                    task_id, waited = await gated_task(host, tmp_path / f"gate-{n}", kind, n % 2 == 1)
                    assert b"events_since_last_response" in waited, waited[:300]
                    shown = await host.tool("get_task", {"task_id": task_id})
                    replies[fast] += [steady(waited), steady(shown)]
                for server, tool, args in CASES:
                    call = {"server": server, "tool": tool, "args": args, "timeout_ms": 0}
                    task = json.loads(await host.tool("execute_tool", call))["result"]["structuredContent"]
                    fetch = {"task_id": task["proxy_task"]["task_id"], "timeout_ms": 30_000}
                    await host.tool("get_task_result", fetch)  # its end may come with it, or went before
                    replies[fast].append(steady(await host.tool("get_task_result", fetch)))
    for n, (by_fast, by_slow) in enumerate(zip(replies[True], replies[False], strict=True)):
        assert by_fast == by_slow, (n, by_fast, by_slow)
    assert b'"text":"opened \xc3\xa9"' in replies[True][0]
    assert b'"text":"plain \xc3\xa9 \\\\ \\" \\n"' in replies[True][4 * len(GATED_KINDS)]


async def gated_task(host: Host, gate: Path, kind: str, by_token: bool) -> tuple[str, bytes]:
    """A gated call promoted at once, its gate opened, its result waited for: with get_task_result,
    or with execute_tool and the task's own resume token."""
    args = {"file": str(gate), "text": "opened é", **({"kind": kind} if kind else {})}
    call = {"server": "raw", "tool": "gated", "args": args, "timeout_ms": 0}
    task = json.loads(await host.tool("execute_tool", call))["result"]["structuredContent"]["proxy_task"]
    gate.touch()
    if by_token:
        waited = await host.tool(
            "execute_tool", {**call, "resume_token": task["resume_token"], "timeout_ms": 30_000}
        )
    else:
        waited = await host.tool("get_task_result", {"task_id": task["task_id"], "timeout_ms": 30_000})
    gate.unlink()  # the next lane's call finds its gate shut again (the same path: the same arguments)
    Path(f"{gate}.held").unlink()
    return task["task_id"], waited


def odd_lines() -> list[dict[str, Any]]:
    """tools/call requests a host may get wrong or send unusually: the lane must leave each to the
    slow path, or answer it exactly as the slow path does."""
    echo = {"server": "raw", "tool": "echo", "args": {"text": "odd"}}
    return [
        {"id": "s-1", "params": {"name": "execute_tool", "arguments": echo}},  # a string id
        {"id": 101, "params": {"name": "execute_tool", "arguments": [1, 2]}},
        {"id": 102, "params": {"name": "execute_tool", "arguments": {"server": "raw"}}},
        {"id": 103, "params": {"name": "execute_tool", "arguments": {**echo, "args": "no"}}},
        {"id": 104, "params": {"name": "execute_tool", "arguments": echo, "_meta": {"progressToken": 1.5}}},
        {"id": 105, "params": {"name": "execute_tool", "arguments": echo, "_meta": {"other": {"k": 1}}}},
        {"id": 106, "params": {"name": "raw__echo", "arguments": {"text": "not listed directly"}}},
        {"id": 107, "params": {"name": 7, "arguments": echo}},
        {"id": 108, "params": {"name": "execute_tool", "arguments": {**echo, "tool": "nope"}}},
        {"id": 109, "params": "not an object"},
        {"id": 110, "jsonrpc": "1.0", "params": {"name": "execute_tool", "arguments": echo}},
    ]


async def test_odd_tool_calls_from_the_host_get_the_slow_paths_answers(config: Path) -> None:
    replies: dict[bool, list[bytes]] = {}
    for fast in (True, False):
        async with serving_raw(config, fast) as host:
            with anyio.fail_after(BOUND_S):
                assert lane_of(await host.execute("raw", "request_id", {})) == ("fast" if fast else "slow")
                replies[fast] = []
                for line in odd_lines():
                    await host.write({"jsonrpc": "2.0", "method": "tools/call", **line})
                    replies[fast].append(await host.reply(line["id"]))
                assert lane_of(await host.execute("raw", "request_id", {})) == ("fast" if fast else "slow")
    for line, on_fast, on_slow in zip(odd_lines(), replies[True], replies[False], strict=True):
        assert on_fast == on_slow, line
    assert json.loads(replies[True][0])["result"]["content"][0]["text"] == "odd"


async def test_ids_are_never_mixed_up_under_200_concurrent_calls(config: Path) -> None:
    async with serving_raw(config) as host:
        with anyio.fail_after(BOUND_S * 2):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            sent = {}
            for n in range(200):
                server = ("raw", "spaced", "echo")[n % 3]
                args = {"server": server, "tool": "echo", "args": {"text": f"call {n}"}}
                sent[await host.request("tools/call", {"name": "execute_tool", "arguments": args})] = n
            for request_id, n in sent.items():
                result = json.loads(await host.reply(request_id))["result"]
                assert not result.get("isError"), result
                assert result["content"][0]["text"] == f"call {n}"
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"


async def test_progress_reaches_the_host_during_a_fast_call(config: Path) -> None:
    async with serving_raw(config) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            args = {"server": "echo", "tool": "slow", "args": {"seconds": 0.5, "steps": 5}}
            line = await host.tool("execute_tool", args, meta={"progressToken": "tok-1"})
            assert json.loads(line)["result"]["content"][0]["text"] == "slept 0.5 s"
            notes = [json.loads(x) for x in host.lines]
            progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
            assert [p["progressToken"] for p in progress] == ["tok-1"] * len(progress)
            assert [p["progress"] for p in progress][-5:] == [1, 2, 3, 4, 5]
            assert progress[-1]["message"] == "step 5/5"


async def test_a_question_during_a_fast_call_makes_it_a_task_that_the_answer_completes(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "config.toml", hostile_table("raw", "--compact"), example_table("elicit", "elicit.py")
    )
    async with serving_raw(config) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            promoted = (await host.execute("elicit", "ask", {}))["structuredContent"]
            task_id = promoted["proxy_task"]["task_id"]
            [question] = promoted["pending_client_action"]["elicitations"]
            assert question["task_id"] == task_id
            answer = {"request_id": question["request_id"], "action": "accept", "content": {"name": "Ada"}}
            await host.result("respond_to_elicitation", answer)
            result = await host.result("get_task_result", {"task_id": task_id})
            assert result["content"][0]["text"] == "hello Ada"


async def test_a_host_cancel_and_cancel_task_reach_the_backend(config: Path, tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    async with serving_raw(config) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            args = {"server": "echo", "tool": "slow", "args": {"seconds": 30, "steps": 30}}
            request_id = await host.request("tools/call", {"name": "execute_tool", "arguments": args})
            await logged(log, "started slow", 1)
            await host.write(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
            )
            await logged(log, "cancelled slow", 1)
            promoted = await host.execute("echo", "slow", {"seconds": 30, "steps": 30}, timeout_ms=100)
            task_id = promoted["structuredContent"]["proxy_task"]["task_id"]
            cancelled = await host.result("cancel_task", {"task_id": task_id})
            assert cancelled["structuredContent"]["task"]["status"] == "cancelled"
            await logged(log, "cancelled slow", 2)
            assert (await host.execute("echo", "echo", {"text": "still here"}))["content"][0][
                "text"
            ] == "still here"
            assert all(
                json.loads(x).get("id") != request_id for x in host.lines
            )  # a cancelled request: no reply


async def test_a_backend_dying_mid_call_fails_the_call_with_its_exit_and_restarts(raw_only: Path) -> None:
    async with serving_raw(raw_only) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            pid = int((await host.execute("raw", "pid", {}))["content"][0]["text"])
            died = await host.execute("raw", "die", {"code": 3})
            assert died["isError"] is True
            text = died["content"][0]["text"]
            assert "Backend 'raw' exited during tools/call 'die'" in text and "exit code 3" in text, text
            assert "hostile: dying on request" in text
            await host.ready("raw")  # restarted
            assert not alive(pid)
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"


async def test_a_suggested_next_tool_is_followed_and_a_slow_call_keeps_its_whole_result(
    raw_only: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    async with serving_raw(raw_only) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("raw", "request_id", {})) == "fast"
            chained = await host.execute("raw", "shaped", {"kind": "followed"})
            promoted = await host.execute("raw", "gated", gate.args("done"), timeout_ms=0)
            task_id = promoted["structuredContent"]["proxy_task"]["task_id"]
            gate.open()
            done = await host.result("get_task_result", {"task_id": task_id, "timeout_ms": 20_000})
    assert chained["content"][0]["text"] == "followed"
    steps = json.loads(chained["content"][1]["text"])["tool_chain"]["steps"]
    assert [(s["tool"], s["outcome"], s["text"]) for s in steps] == [
        ("shaped", "ok", "first"),
        ("echo", "ok", "followed"),
    ]
    assert done["content"][0]["text"] == "done" and not done.get("isError")


async def test_deny_rules_approvals_and_direct_names_hold_on_the_fast_lane(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        '[defaults]\nexpose = "both"\n',
        hostile_table("guard", "--compact", tools={"deny": ["pid"]}, confirm=["echo"]),
    )
    async with serving_raw(config) as host:
        with anyio.fail_after(BOUND_S):
            assert lane_of(await host.execute("guard", "request_id", {})) == "fast"
            assert lane_of(await host.result("guard__request_id", {})) == "fast"
            denied = await host.execute("guard", "pid", {})
            asked = (await host.execute("guard", "echo", {"text": "hi"}))["structuredContent"]
            [step] = asked["saga"]["steps"]
            answer = {"request_id": step["step_id"], "action": "decline"}
            await host.result("respond_to_elicitation", answer)
            task_id = asked["proxy_task"]["task_id"]
            declined = await host.result("get_task_result", {"task_id": task_id, "timeout_ms": 20_000})
    assert denied["isError"] and "tools.deny" in denied["content"][0]["text"]
    assert step["purpose"] == "approval" and step["approval"]["tool"] == "echo"
    assert declined["structuredContent"]["called"] is False
