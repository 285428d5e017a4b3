"""Whatever a host writes to `emceepee serve`'s stdin, it gets a JSON-RPC answer and serve keeps serving."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli.server.stdio import MAX_LINE_BYTES
from tests.support import RawHost, example_table, serve_command, write_config

pytestmark = pytest.mark.anyio

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class LineHost(RawHost):
    """A RawHost that can write any bytes and read every message, errors with a null id included."""

    async def initialize_as(self, version: str) -> dict[str, Any]:
        self.next_id += 1
        await self.write(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "line-host", "version": "0"},
                },
            }
        )
        answer = await self.until_id(self.next_id)
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = answer[-1]["result"]
        return result

    async def write(self, message: Any) -> None:
        await self.raw(json.dumps(message).encode() + b"\n")

    async def raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def message(self) -> Any:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    async def until_id(self, request_id: Any) -> list[Any]:
        """Every message up to and including the one answering `request_id`."""
        seen = []
        while True:
            seen.append(await self.message())
            if isinstance(seen[-1], dict) and seen[-1].get("id") == request_id and request_id is not None:
                return seen

    async def after(self, data: bytes) -> list[Any]:
        """Write `data`, then a ping; what came back before the ping's answer."""
        self.next_id += 1
        ping = {"jsonrpc": "2.0", "id": f"ping-{self.next_id}", "method": "ping"}
        await self.raw(data + json.dumps(ping).encode() + b"\n")
        *before, answer = await self.until_id(ping["id"])
        assert answer.get("result") == {}, answer
        # serve's own notifications (a backend connected: list_changed) are not answers to `data`
        return [m for m in before if not (isinstance(m, dict) and "method" in m and "id" not in m)]


@asynccontextmanager
async def line_host(config: Path) -> AsyncIterator[LineHost]:
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        yield LineHost(process)
    finally:
        if process.stdin is not None:
            await process.stdin.aclose()
        with anyio.fail_after(20):
            code = await process.wait()
        await process.aclose()
        assert code == 0, "serve did not exit cleanly at stdin's EOF"


def error(message: Any, code: int, request_id: Any = None) -> str:
    """The error's message, after checking it is a JSON-RPC error with this code and id."""
    assert message["jsonrpc"] == "2.0" and message["id"] == request_id, message
    assert message["error"]["code"] == code, message
    return str(message["error"]["message"])


async def normal_calls_work(host: LineHost) -> None:
    listing = await host.send("tools/call", {"name": "list_servers", "arguments": {}})
    assert [row["name"] for row in listing["structuredContent"]["servers"]] == ["echo"]
    echoed = await host.send(
        "tools/call",
        {"name": "execute_tool", "arguments": {"server": "echo", "tool": "echo", "args": {"text": "hi"}}},
    )
    assert echoed["content"][0]["text"] == "hi"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))


async def test_every_bad_line_gets_its_json_rpc_error_and_serve_keeps_serving(config: Path) -> None:
    async with line_host(config) as host:
        with anyio.fail_after(60):
            await host.initialize_as("2025-11-25")
            await host.send("tools/list")
            await normal_calls_work(host)

            [bad] = await host.after(b"this is not json\n")
            assert error(bad, PARSE_ERROR).startswith("Parse error")
            [bad] = await host.after(b'{"jsonrpc": "2.0", "id": 41}\n')
            assert error(bad, INVALID_REQUEST, 41) == "Invalid Request: 'method' must be a string"
            [bad] = await host.after(b'{"jsonrpc": "2.0", "id": "x", "method": "ping", "params": 5}\n')
            assert error(bad, INVALID_REQUEST, "x") == "Invalid Request: 'params' must be an object"
            [bad] = await host.after(b'{"jsonrpc": "1.0", "id": 42, "method": "ping"}\n')
            assert "jsonrpc" in error(bad, INVALID_REQUEST, 42)
            for bad_id in (b"true", b"null", b"1.5", b"[1]"):
                [bad] = await host.after(b'{"jsonrpc": "2.0", "id": ' + bad_id + b', "method": "ping"}\n')
                assert "'id' must be a string or an integer" in error(bad, INVALID_REQUEST)
            [bad] = await host.after(b"42\n")
            assert error(bad, INVALID_REQUEST) == "Invalid Request: a message must be a JSON object"
            # A malformed response is not answered (that could ping-pong), and breaks nothing.
            assert await host.after(b'{"jsonrpc": "2.0", "id": 999, "result": 5}\n') == []
            assert await host.after(b"\n   \n\r\n") == []  # blank lines are not messages

            # Not MCP 2025-03-26: an array is refused whole, and none of it runs.
            [bad] = await host.after(b'[{"jsonrpc": "2.0", "id": 43, "method": "ping"}]\n')
            assert "batches are not part of MCP protocol version 2025-11-25" in error(bad, INVALID_REQUEST)

            [bad] = await host.after(bytes(b for b in range(256) if b != 10) * 40 + b"\n")
            error(bad, PARSE_ERROR)
            [bad] = await host.after(b"[" * 100_000 + b"]" * 100_000 + b"\n")  # JSON, however deep: a batch
            assert "batches are not part of MCP" in error(bad, INVALID_REQUEST)
            [bad] = await host.after(b"[" * 100_000 + b"]" * 99_999 + b"\n")
            assert "recursion" in error(bad, PARSE_ERROR)
            nested = b'{"jsonrpc": "2.0", "id": 44, "method": "tools/call", "params": {"a": ' + b"[" * 5000
            [bad] = await host.after(nested + b"]" * 5000 + b"}}\n")
            assert "params.a[0][0][0]… is nested more than" in error(bad, INVALID_PARAMS, 44)
            [bad] = await host.after(
                b'{"jsonrpc": "2.0", "id": 45, "method": "ping", "x": "' + b"y" * (5 << 20) + b"\n"
            )
            error(bad, PARSE_ERROR)  # a 5 MiB line with an unterminated string
            [bad] = await host.after(b"z" * (MAX_LINE_BYTES + (1 << 20)) + b"\n")
            assert "longer than 64 MiB" in error(bad, PARSE_ERROR)

            await normal_calls_work(host)


async def test_a_flood_of_requests_and_garbage_is_answered_line_for_line(config: Path) -> None:
    async with line_host(config) as host:
        with anyio.fail_after(90):
            await host.initialize_as("2025-11-25")
            await host.send("tools/list")
            flood = b"".join(
                json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode() + b"\n" + b"}{garbage\n"
                for i in range(2000)
            )
            calls = b"".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": f"c{i}",
                        "method": "tools/call",
                        "params": {"name": "list_servers"},
                    }
                ).encode()
                + b"\n"
                for i in range(200)
            )
            await host.raw(flood + calls)
            answered: dict[Any, Any] = {}
            parse_errors = 0
            while len(answered) < 2200 or parse_errors < 2000:
                message = await host.message()
                if "id" not in message:  # a notification (a backend connected: list_changed)
                    continue
                if message["id"] is None:
                    parse_errors += error(message, PARSE_ERROR) != ""
                else:
                    answered[message["id"]] = message
            assert all(answered[i]["result"] == {} for i in range(2000))
            assert all("servers" in answered[f"c{i}"]["result"]["structuredContent"] for i in range(200))
            await normal_calls_work(host)


async def test_a_2025_03_26_batch_gets_one_array_with_every_reply(config: Path) -> None:
    async with line_host(config) as host:
        with anyio.fail_after(60):
            assert (await host.initialize_as("2025-03-26"))["protocolVersion"] == "2025-03-26"
            batch = [
                {"jsonrpc": "2.0", "id": "a", "method": "ping"},
                {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "list_servers"}},
                {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
                {"jsonrpc": "2.0", "id": "c", "params": {}},
                {"jsonrpc": "2.0", "id": "d", "method": "no/such/method"},
            ]
            [replies] = await host.after(json.dumps(batch).encode() + b"\n")
            by_id = {reply["id"]: reply for reply in replies}
            assert sorted(by_id) == ["a", "b", "c", "d"]
            assert by_id["a"]["result"] == {}
            assert by_id["b"]["result"]["structuredContent"]["servers"][0]["name"] == "echo"
            assert error(by_id["c"], INVALID_REQUEST, "c") == "Invalid Request: 'method' must be a string"
            assert by_id["d"]["error"]["code"] == -32601
            only_notifications = [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]
            assert await host.after(json.dumps(only_notifications).encode() + b"\n") == []
            [bad] = await host.after(b"[]\n")
            assert error(bad, INVALID_REQUEST) == "Invalid Request: an empty batch"
            [replies] = await host.after(b'[1, {"jsonrpc": "2.0", "id": 7, "method": "ping"}]\n')
            assert sorted(replies, key=lambda r: str(r["id"])) == [
                {"jsonrpc": "2.0", "id": 7, "result": {}},
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {
                        "code": INVALID_REQUEST,
                        "message": "Invalid Request: a message must be a JSON object",
                    },
                },
            ]
            await normal_calls_work(host)


async def test_a_file_as_stdin_and_stdout_is_served_to_its_end(config: Path, tmp_path: Path) -> None:
    """Files are read and written in a worker thread (pipes and sockets on the loop): the same
    answers, and serve ends at the file's end."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "f", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    given, got = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    given.write_text("".join(json.dumps(r) + "\n" for r in requests) + "not json\n")
    with given.open("rb") as stdin, got.open("wb") as stdout:
        with anyio.fail_after(60):
            process = await anyio.run_process(serve_command(config), stdin=stdin, stdout=stdout, check=False)
    answers = {a.get("id"): a for a in map(json.loads, got.read_text().splitlines())}
    assert process.returncode == 0
    assert sorted(answers, key=str) == [1, 2, None]
    assert "execute_tool" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert answers[None]["error"]["code"] == PARSE_ERROR
