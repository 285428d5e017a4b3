"""The protocol's own Tasks (MCP 2025-11-25) toward the host, over the real `emceepee serve`.

A host on serve's pipes, as a 2025-11-25 host works: it initializes, lists the tools, makes a
few plain calls, and then sends task-augmented calls and `tasks/*` requests. The SDK client cannot
send a task-augmented call nor read `CreateTaskResult` or `notifications/tasks/status`, so the host
speaks JSON-RPC lines itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from tests.e2e.test_backend_tasks import logged
from tests.e2e.test_task_pages import history
from tests.support import Gate, example_table, hostile_table, serve_command, write_config

pytestmark = pytest.mark.anyio

RELATED = "io.modelcontextprotocol/related-task"
INVALID_PARAMS, METHOD_NOT_FOUND = -32602, -32601
MALFORMED_TASKS: list[Any] = [{"ttl": -1}, {"ttl": "60000"}, {"ttl": 1.5}, {"ttl": True}, "soon", [], 7]


class WireHost:
    """A 2025-11-25 host speaking JSON-RPC lines on serve's pipes, several requests in flight at
    once; what serve sends besides replies (notifications, its own requests) is kept in `heard`."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.next_id = 0
        self.waiting: dict[int, anyio.Event] = {}
        self.replies: dict[int, dict[str, Any]] = {}
        self.heard: list[dict[str, Any]] = []
        self.news = anyio.Event()

    async def read(self) -> None:
        """Hand each reply to its request and keep the rest, until serve's stdout ends."""
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if "method" not in message and message.get("id") in self.waiting:
                    self.replies[message["id"]] = message
                    self.waiting.pop(message["id"]).set()
                else:
                    self.heard.append(message)
                    self.news.set()
                    self.news = anyio.Event()

    async def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def send(self, method: str, params: Any) -> int:
        """Send a request without waiting for its reply; its id."""
        self.next_id += 1
        self.waiting[self.next_id] = anyio.Event()
        await self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def reply(self, request_id: int) -> dict[str, Any]:
        """The whole reply to a request sent (its `result` or its `error`)."""
        if request_id in self.waiting:
            await self.waiting[request_id].wait()
        return self.replies.pop(request_id)

    async def request(self, method: str, params: Any) -> dict[str, Any]:
        return await self.reply(await self.send(method, params))

    async def result(self, method: str, params: Any) -> dict[str, Any]:
        reply = await self.request(method, params)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def error(self, method: str, params: Any) -> dict[str, Any]:
        reply = await self.request(method, params)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        init = await self.result(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities or {},
                "clientInfo": {"name": "tasks-host", "version": "0"},
            },
        )
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init

    async def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A plain call's result."""
        return await self.result("tools/call", {"name": name, "arguments": arguments})

    async def task(self, name: str, arguments: dict[str, Any], ttl: int = 60_000) -> dict[str, Any]:
        """A task-augmented call's task."""
        created = await self.result(
            "tools/call", {"name": name, "arguments": arguments, "task": {"ttl": ttl}}
        )
        task: dict[str, Any] = created["task"]
        return task

    async def until_heard(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message serve sent besides replies that is `wanted` (the caller bounds the wait)."""
        while True:
            news = self.news
            for message in self.heard:
                if wanted(message):
                    return message
            await news.wait()

    async def until_ready(self, *servers: str) -> None:
        """As a host begins: list the tools, then each server's, until it is up (each listing
        waits a little for a backend still starting)."""
        await self.result("tools/list", {})
        for server in servers:
            while True:
                listed = (await self.tool("list_tools", {"server": server}))["structuredContent"]
                if "tools" in listed["servers"][0]:
                    break


def status_of(task_id: str, status: str) -> Callable[[dict[str, Any]], bool]:
    """A notifications/tasks/status saying the task is now `status`."""

    def wanted(message: dict[str, Any]) -> bool:
        params = message.get("params") or {}
        return bool(
            message.get("method") == "notifications/tasks/status"
            and params.get("taskId") == task_id
            and params.get("status") == status
        )

    return wanted


def statuses(host: WireHost, task_id: str) -> list[str]:
    """The statuses the host was told of for one task, in order."""
    return [
        m["params"]["status"]
        for m in host.heard
        if m.get("method") == "notifications/tasks/status" and m["params"]["taskId"] == task_id
    ]


def texts(result: dict[str, Any]) -> list[str]:
    """The text blocks of a result, without the envelope's."""
    return [
        block["text"]
        for block in result["content"]
        if block["type"] == "text" and not block["text"].startswith(('{"events_since', '{"pending_client'))
    ]


@asynccontextmanager
async def wire_host(config: Path, stderr: Path) -> AsyncIterator[WireHost]:
    """A real `emceepee serve` with a host on its pipes (its stderr in a file, for a failure to show)."""
    with stderr.open("ab") as log:
        process = await anyio.open_process(serve_command(config), env={**os.environ}, stderr=log)
        try:
            async with anyio.create_task_group() as tg:
                host = WireHost(process)
                tg.start_soon(host.read)
                yield host
                tg.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.move_on_after(10):
                await process.wait()
            await process.aclose()


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


@pytest.fixture
def config(tmp_path: Path, record: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("echo", "echo.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
        hostile_table("h", expose="both"),
        example_table("tasks", "tasks.py", expose="both"),
    )


async def test_a_task_augmented_call_is_a_task_the_host_polls_and_then_reads(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            init = await host.initialize()
            listed = await host.result("tools/list", {})
            await host.until_ready("echo", "h", "tasks")
            plain = await host.tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "plain"}}
            )
            await host.tool("list_tasks", {})
            listed = await host.result("tools/list", {})
            task = await host.task(
                "execute_tool", {"server": "h", "tool": "gated", "args": gate.args("gated done")}
            )
            await gate.held()
            working = await host.result("tasks/get", {"taskId": task["taskId"]})
            gate.open()
            result = await host.result("tasks/result", {"taskId": task["taskId"]})
            told = await host.until_heard(status_of(task["taskId"], "completed"))
            done = await host.result("tasks/get", {"taskId": task["taskId"]})
            seen = (await host.tool("get_task", {"task_id": task["taskId"]}))["structuredContent"]["task"]
            direct = await host.task("h__echo", {"text": "direct"})
            direct_result = await host.result("tasks/result", {"taskId": direct["taskId"]})
            again = await host.tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "after"}}
            )
    assert init["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in listed["tools"]}
    assert tools["execute_tool"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["list_servers"] and "execution" not in tools["get_task"]
    assert tools["h__gated"]["execution"] == {"taskSupport": "optional"}
    assert tools["tasks__research"]["execution"] == {"taskSupport": "required"}  # the backend requires it
    assert tools["tasks__quick"]["execution"] == {"taskSupport": "optional"}  # emceepee runs it as a task
    assert texts(plain) == ["plain"] and texts(again) == ["after"]
    assert task["status"] == "working" and len(task["taskId"]) == 26
    assert task["ttl"] == 86_400_000 and task["pollInterval"] == 1000 and task["createdAt"].endswith("Z")
    assert working["status"] == "working" and working["taskId"] == task["taskId"]
    assert texts(result) == ["gated done"] and not result.get("isError")
    assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
    assert told["params"]["status"] == "completed" and statuses(host, task["taskId"])[-1] == "completed"
    assert done["status"] == "completed" and seen["status"] == "completed"
    assert texts(direct_result) == ["direct"] and direct_result["_meta"][RELATED] == {
        "taskId": direct["taskId"]
    }


async def test_a_task_whose_tool_answers_with_an_error_result_is_failed_and_its_result_is_kept(
    config: Path, tmp_path: Path
) -> None:
    """2025-11-25: a tool call whose result has isError is a `failed` task; `tasks/result` still
    gives that result whole. An isError deeper in a result (its _meta, its text) is not the tool's."""
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.until_ready("echo", "h")
            await host.tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "first"}})
            failing = await host.task(
                "execute_tool", {"server": "echo", "tool": "fail", "args": {"message": "no"}}
            )
            failed = await host.result("tasks/result", {"taskId": failing["taskId"]})
            got = await host.result("tasks/get", {"taskId": failing["taskId"]})
            tricky = await host.task("h__shaped", {"kind": "tricky"})
            tricky_result = await host.result("tasks/result", {"taskId": tricky["taskId"]})
            tricky_got = await host.result("tasks/get", {"taskId": tricky["taskId"]})
            listed = {t["taskId"]: t for t in (await host.result("tasks/list", {}))["tasks"]}
            seen = (await host.tool("get_task", {"task_id": failing["taskId"]}))["structuredContent"]["task"]
    assert failed["isError"] is True and texts(failed) == ["no"]
    assert got["status"] == "failed" and "error result" in got["statusMessage"]
    assert "completed" not in statuses(host, failing["taskId"])  # told nothing else
    assert listed[failing["taskId"]]["status"] == "failed"
    assert seen["status"] == "completed" and seen["is_error"] is True  # the journal's own word
    assert tricky_result["isError"] is False and tricky_got["status"] == "completed"
    assert listed[tricky["taskId"]]["status"] == "completed"


async def test_tasks_list_pages_through_every_task_with_its_cursor(tmp_path: Path) -> None:
    ids = history(120)  # finished tasks of a serve that has stopped
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.until_ready("echo")
            await host.tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "first"}})
            mine = await host.task("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}})
            await host.result("tasks/result", {"taskId": mine["taskId"]})
            pages = [await host.result("tasks/list", {})]
            while "nextCursor" in pages[-1]:
                pages.append(await host.result("tasks/list", {"cursor": pages[-1]["nextCursor"]}))
            made_up = await host.error("tasks/list", {"cursor": "made-up"})
            cut = await host.error("tasks/list", {"cursor": pages[0]["nextCursor"][:-3]})
            listed = await host.tool("list_tasks", {"include_completed": True, "limit": 1})
    listed_ids = [t["taskId"] for page in pages for t in page["tasks"]]
    assert [len(page["tasks"]) for page in pages] == [50, 50, 21]
    assert listed_ids == [mine["taskId"], *ids[::-1]]  # newest first, each once
    assert {t["status"] for page in pages for t in page["tasks"]} == {"completed"}
    assert made_up["code"] == INVALID_PARAMS and "is not one a task listing gave" in made_up["message"]
    assert cut["code"] == INVALID_PARAMS
    assert listed["structuredContent"]["tasks"][0]["task_id"] == mine["taskId"]  # the meta-tools see it


async def test_tasks_cancel_reaches_the_backend_and_a_finished_task_cannot_be_cancelled(
    config: Path, record: Path, tmp_path: Path
) -> None:
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.until_ready("echo")
            await host.tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "warm"}})
            task = await host.task(
                "execute_tool", {"server": "echo", "tool": "slow", "args": {"seconds": 60}}
            )
            await logged(record, "started slow")
            cancelled = await host.result("tasks/cancel", {"taskId": task["taskId"]})
            await logged(record, "cancelled slow")
            told = await host.until_heard(status_of(task["taskId"], "cancelled"))
            twice = await host.error("tasks/cancel", {"taskId": task["taskId"]})
            result = await host.result("tasks/result", {"taskId": task["taskId"]})
            got = await host.result("tasks/get", {"taskId": task["taskId"]})
            after = await host.tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "after"}}
            )
    assert cancelled["taskId"] == task["taskId"] and cancelled["status"] == "cancelled"
    assert told["params"]["status"] == "cancelled"
    assert twice["code"] == INVALID_PARAMS and "already cancelled" in twice["message"]
    assert result["isError"] and "cancelled" in texts(result)[0]  # what get_task_result says too
    assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
    assert got["status"] == "cancelled" and got["statusMessage"].startswith("cancelled")
    assert texts(after) == ["after"]


def elicit_config(tmp_path: Path, record: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("elicit", "elicit.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
    )


async def test_a_question_raised_during_a_task_puts_it_in_input_required_until_answered(
    tmp_path: Path, record: Path
) -> None:
    async with wire_host(elicit_config(tmp_path, record), tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()  # a host that cannot answer questions: they are parked
            await host.until_ready("elicit")
            await host.tool("list_servers", {})
            task = await host.task("execute_tool", {"server": "elicit", "tool": "ask", "args": {}})
            if task["status"] != "input_required":  # the question may come before the task is shown
                await host.until_heard(status_of(task["taskId"], "input_required"))
            got = await host.result("tasks/get", {"taskId": task["taskId"]})
            [listed] = [
                t for t in (await host.result("tasks/list", {}))["tasks"] if t["taskId"] == task["taskId"]
            ]
            [question] = (await host.tool("get_elicitations", {}))["structuredContent"]["elicitations"]
            await host.tool(
                "respond_to_elicitation",
                {"request_id": question["request_id"], "action": "accept", "content": {"name": "Ada"}},
            )
            result = await host.result("tasks/result", {"taskId": task["taskId"]})
            await host.until_heard(status_of(task["taskId"], "completed"))
    message = got["statusMessage"]
    assert got["status"] == "input_required" and listed["status"] == "input_required"
    assert question["request_id"] in message and "respond_to_elicitation" in message
    assert f"emceepee answer {question['request_id']}" in message
    assert texts(result) == ["hello Ada"]
    assert [task["status"], *statuses(host, task["taskId"])][:2] in (
        ["input_required", "working"],  # answered: working again, then completed (or straight to it)
        ["input_required", "completed"],
        ["working", "input_required"],
    )
    assert statuses(host, task["taskId"])[-1] == "completed"


async def test_a_question_of_a_task_goes_to_a_host_that_can_answer_it(tmp_path: Path, record: Path) -> None:
    async with wire_host(elicit_config(tmp_path, record), tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize({"elicitation": {"form": {}}})
            await host.until_ready("elicit")
            task = await host.task("execute_tool", {"server": "elicit", "tool": "ask", "args": {}})
            asked = await host.until_heard(lambda m: m.get("method") == "elicitation/create")
            got = await host.result("tasks/get", {"taskId": task["taskId"]})
            await host.write(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": {"name": "Bo"}},
                }
            )
            result = await host.result("tasks/result", {"taskId": task["taskId"]})
    assert got["status"] == "input_required" and "emceepee sent you" in got["statusMessage"]
    assert texts(result) == ["hello Bo"]


async def test_after_kill_9_the_next_serve_answers_tasks_get_and_tasks_result_from_the_journal(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.until_ready("h")
            await host.tool("execute_tool", {"server": "h", "tool": "echo", "args": {"text": "plain"}})
            finished = await host.task(
                "execute_tool", {"server": "h", "tool": "echo", "args": {"text": "kept"}}
            )
            await host.result("tasks/result", {"taskId": finished["taskId"]})
            lost = await host.task("execute_tool", {"server": "h", "tool": "gated", "args": gate.args()})
            await gate.held()
            host.process.kill()  # kill -9: nothing is said, nothing is cleaned up
            await host.process.wait()
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.result("tools/list", {})
            kept = await host.result("tasks/get", {"taskId": finished["taskId"]})
            kept_result = await host.result("tasks/result", {"taskId": finished["taskId"]})
            gone = await host.result("tasks/get", {"taskId": lost["taskId"]})
            gone_result = await host.result("tasks/result", {"taskId": lost["taskId"]})
            cancel_gone = await host.error("tasks/cancel", {"taskId": lost["taskId"]})
            listed = [t["taskId"] for t in (await host.result("tasks/list", {}))["tasks"]]
    assert kept["status"] == "completed" and texts(kept_result) == ["kept"]
    assert kept_result["_meta"][RELATED] == {"taskId": finished["taskId"]}
    assert gone["status"] == "failed" and gone["statusMessage"].startswith("interrupted: emceepee stopped")
    assert gone_result["isError"] and "interrupted" in texts(gone_result)[0]
    assert cancel_gone["code"] == INVALID_PARAMS
    assert listed[:2] == [lost["taskId"], finished["taskId"]]


async def test_hostile_task_requests_get_errors_and_serve_goes_on(config: Path, tmp_path: Path) -> None:
    gate = Gate(tmp_path / "gate")
    call = {"name": "execute_tool", "arguments": {"server": "h", "tool": "echo", "args": {"text": "t"}}}
    async with wire_host(config, tmp_path / "serve.log") as host:
        with anyio.fail_after(60):
            await host.initialize()
            await host.until_ready("h")
            await host.tool("execute_tool", {"server": "h", "tool": "echo", "args": {"text": "plain"}})
            unknown = [
                await host.error(method, {"taskId": task_id})
                for method in ("tasks/get", "tasks/result", "tasks/cancel")
                for task_id in ("", "nope", "0" * 26, "x" * 100_000, "%")
            ]
            not_text = await host.error("tasks/get", {"taskId": 42})
            no_id = await host.error("tasks/result", {})
            bad_tasks = [await host.error("tools/call", {**call, "task": task}) for task in MALFORMED_TASKS]
            huge_ttl = await host.result("tools/call", {**call, "task": {"ttl": 10**30}})
            null_task = await host.result("tools/call", {**call, "task": None})  # a plain call
            not_object = await host.error(
                "tools/call", {"name": "execute_tool", "arguments": "x", "task": {}}
            )
            no_name = await host.error("tools/call", {"arguments": {}, "task": {}})
            odd_cursor = await host.error("tasks/list", {"cursor": 42})
            forbidden = await host.error("tools/call", {"name": "list_servers", "arguments": {}, "task": {}})
            no_tool = await host.error("tools/call", {"name": "no_such_tool", "arguments": {}, "task": {}})
            bad_args = await host.error(
                "tools/call", {"name": "execute_tool", "arguments": {"server": 1}, "task": {}}
            )
            no_server = await host.error(
                "tools/call",
                {"name": "execute_tool", "arguments": {"server": "nope", "tool": "x"}, "task": {}},
            )
            held = await host.task("execute_tool", {"server": "h", "tool": "gated", "args": gate.args("all")})
            await gate.held()
            given_up = await host.send("tasks/result", {"taskId": held["taskId"]})
            await host.write(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": given_up}}
            )
            still = await host.result("tasks/get", {"taskId": held["taskId"]})  # its wait ended, not the task
            sent = [await host.send("tasks/result", {"taskId": held["taskId"]}) for _ in range(4)]
            gate.open()  # the four wait at once, and all get the result
            waiters = [(await host.reply(request_id))["result"] for request_id in sent]
            pong = await host.result("ping", {})
    assert all(e["code"] == INVALID_PARAMS for e in unknown), unknown
    assert all(len(e["message"]) < 200 for e in unknown)  # a huge id is not echoed whole
    assert not_text["code"] == INVALID_PARAMS and no_id["code"] == INVALID_PARAMS
    assert all(e["code"] == INVALID_PARAMS for e in bad_tasks), bad_tasks
    assert huge_ttl["task"]["status"] in ("working", "completed") and huge_ttl["task"]["ttl"] == 86_400_000
    assert texts(null_task) == ["t"]
    assert [not_object["code"], no_name["code"], odd_cursor["code"]] == [INVALID_PARAMS] * 3
    assert forbidden["code"] == METHOD_NOT_FOUND and "does not run as a task" in forbidden["message"]
    assert no_tool["code"] == INVALID_PARAMS and "no tool 'no_such_tool'" in no_tool["message"]
    assert bad_args["code"] == INVALID_PARAMS and "arguments.server" in bad_args["message"]
    assert no_server["code"] == INVALID_PARAMS and "nope" in no_server["message"]
    assert still["status"] == "working"
    assert [texts(r) for r in waiters] == [["all"]] * 4
    assert pong == {}
