"""What emceepee writes by hand (emceepee_cli/jsonrpc.py) is, byte for byte, what the SDK writes.

The reference is the SDK itself: its low-level `Server` answering over its own `stdio_server`, fed
and read in memory. Each test has the SDK write a message — a tool's result as the slow lane hands
it over, with and without the envelope's blocks; a progress notification; an error — and
compares the line with what the fast lane writes for the same thing without the SDK's models.
These fail when an SDK release changes its bytes (the order of a result's members, its JSON
escaping, the shape of a response), before any host sees the lanes differ.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from emceepee_cli import jsonrpc
from emceepee_cli.backends.raw_pipe import Answer, Exchanges
from emceepee_cli.errors import JournalError
from emceepee_cli.server.envelope import block_texts, envelope_blocks, payload_result, with_envelope
from emceepee_cli.server.resume_wire import resume_tokens, with_next_token
from emceepee_cli.store.records import Event

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-11-25"  # the fast lane serves handshake-era hosts only
WAIT_S = 5.0

Handler = Callable[[ServerRequestContext[Any], types.CallToolRequestParams], Awaitable[types.CallToolResult]]

PLAIN: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": 'é \\ " \n \u2028 \x01 \x7f 😀 </script>'}], "isError": False},
    {"content": [{"type": "text", "text": "no isError"}]},
    {"content": []},
    {
        "content": [],
        "isError": True,
        "structuredContent": {"b": 1.0, "a": [1, None, 1e300, -0.0, 2**70, 5e-324], "ü": "ß"},
    },
    {"_meta": {"k": {"z": 1, "a": 2}}, "content": [{"text": "x", "type": "text"}], "isError": False},
    {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "structuredContent": {}},
]
IDS: list[jsonrpc.RequestId] = [7, 2**53 + 1, "abc", 'é✓"\\ \x01']
EVENT = Event(event_id="E1", type="task_status", server="s", created_at="t", data={"note": 'ünï "q" \u2028'})
PENDING: dict[str, Any] = {
    "elicitations": [{"request_id": "R1", "message": "Name? 😀"}],
    "sampling_requests": [],
}
FAULT = JournalError("journal.db is locked", hint="emceepee doctor")


class _Stdin:
    """The SDK stdio server's stdin: the lines a test sends it."""

    def __init__(self, lines: MemoryObjectReceiveStream[str]) -> None:
        self.lines = lines

    def __aiter__(self) -> _Stdin:
        return self

    async def __anext__(self) -> str:
        try:
            return await self.lines.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Stdout:
    """The SDK stdio server's stdout: each line it writes, to the test."""

    def __init__(self, lines: MemoryObjectSendStream[str]) -> None:
        self.lines = lines

    async def write(self, text: str) -> None:
        await self.lines.send(text)

    async def flush(self) -> None:
        return None


class SdkHost:
    """A handshake-era host of an SDK server: it sends JSON-RPC lines and reads the SDK's bytes."""

    def __init__(self, stdin: MemoryObjectSendStream[str], stdout: MemoryObjectReceiveStream[str]) -> None:
        self.stdin = stdin
        self.stdout = stdout

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send(json.dumps(message) + "\n")

    async def line(self) -> bytes:
        """The next line the SDK wrote, as bytes on the wire (its newline included)."""
        return (await self.stdout.receive()).encode()

    async def call(self, request_id: jsonrpc.RequestId, meta: dict[str, Any] | None = None) -> None:
        params: dict[str, Any] = {"name": "t", "arguments": {}}
        if meta is not None:
            params["_meta"] = meta
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


@asynccontextmanager
async def sdk_server(on_call_tool: Handler, middleware: bool = False) -> AsyncIterator[SdkHost]:
    """An SDK server over the SDK's own stdio transport, initialized by its host. `middleware`: with
    the resume-token step emceepee's slow lane puts after every tools/call handler."""
    server = Server("sdk", on_call_tool=on_call_tool)
    if middleware:
        server.middleware.append(resume_tokens)
    to_stdin, stdin = anyio.create_memory_object_stream[str](16)
    stdout, from_stdout = anyio.create_memory_object_stream[str](16)
    streams = stdio_server(
        cast(anyio.AsyncFile[str], _Stdin(stdin)), cast(anyio.AsyncFile[str], _Stdout(stdout))
    )
    async with streams as (read, write), anyio.create_task_group() as tg:
        tg.start_soon(server.run, read, write, server.create_initialization_options())
        host = SdkHost(to_stdin, from_stdout)
        init = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        await host.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        await host.line()
        await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield host
        await to_stdin.aclose()  # stdin's EOF ends the server


def answering(result: types.CallToolResult) -> Handler:
    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return result

    return on_call_tool


async def sdk_line(
    result: types.CallToolResult, request_id: jsonrpc.RequestId, middleware: bool = False
) -> bytes:
    with anyio.fail_after(WAIT_S):
        async with sdk_server(answering(result), middleware) as host:
            await host.call(request_id)
            return await host.line()


def line(parts: Iterable[bytes | memoryview]) -> bytes:
    """The parts as the host wire writes them: one line (server/stdio.py's `send_parts`)."""
    return b"".join(bytes(part) for part in parts) + b"\n"


def slow_lane(result: dict[str, Any]) -> types.CallToolResult:
    """A backend's result as the slow lane hands it to the SDK server: read by the SDK session."""
    return types.CallToolResult.model_validate(result, by_name=False)


@pytest.mark.parametrize("result", PLAIN)
@pytest.mark.parametrize("request_id", IDS)
async def test_a_plain_result_passed_raw_is_the_sdks_line(
    result: dict[str, Any], request_id: jsonrpc.RequestId
) -> None:
    body = jsonrpc.canonical(result, None)
    assert body is not None
    assert line(jsonrpc.reply_parts(request_id, [body])) == await sdk_line(slow_lane(result), request_id)


@pytest.mark.parametrize("result", PLAIN)
@pytest.mark.parametrize("piece", [1 << 20, 7])
async def test_the_envelopes_blocks_put_into_a_raw_result_are_the_sdks_line(
    result: dict[str, Any], piece: int
) -> None:
    body = jsonrpc.canonical(result, None)
    assert body is not None
    texts = block_texts(envelope_blocks([EVENT], PENDING, FAULT))

    head = body.index(b'"content":[') + len(b'"content":[')  # the first piece holds `_meta` whole

    def chunks() -> list[bytes]:  # as a spooled result is read back, a piece at a time
        return [body[:head], *(body[at : at + piece] for at in range(head, len(body), piece))]

    parts = jsonrpc.with_text_blocks(chunks, texts)
    assert parts is not None
    enveloped = with_envelope(slow_lane(result), [EVENT], PENDING, own=False, journal_fault=FAULT)
    assert line(jsonrpc.reply_parts("r", parts)) == await sdk_line(enveloped, "r")


OWN: list[types.CallToolResult] = [
    payload_result({"servers": [{"name": "ü", "status": "ready"}]}, "One server."),
    payload_result({"proxy_task": {"task_id": "T", "status": "working", "resume_token": "tok"}}),
    slow_lane(  # a backend's result of no plain shape: the fast lane writes it through the models
        {
            "_meta": {"k": "v"},
            "content": [
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                {"type": "text", "text": "x", "annotations": {"priority": 1.0}},
            ],
            "structuredContent": {"n": 1e-7},
        }
    ),
]


@pytest.mark.parametrize("result", OWN)
@pytest.mark.parametrize("own", [True, False])
async def test_a_result_written_through_the_models_is_the_sdks_line(
    result: types.CallToolResult, own: bool
) -> None:
    enveloped = with_envelope(result, [EVENT], PENDING, own=own, journal_fault=FAULT)
    fast = jsonrpc.reply(9, with_next_token(jsonrpc.tool_result(enveloped, PROTOCOL))) + b"\n"
    assert fast == await sdk_line(enveloped, 9, middleware=True)


@pytest.mark.parametrize("token", [3, "tök-\u2028"])
@pytest.mark.parametrize(
    ("done", "total", "message"), [(0.5, None, None), (1.0, 2.0, 'ünï "q"'), (1e-06, None, "")]
)
async def test_a_progress_notification_is_the_sdks_line(
    token: jsonrpc.RequestId, done: float, total: float | None, message: str | None
) -> None:
    async def reporting(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        await ctx.session.report_progress(done, total, message)
        return types.CallToolResult(content=[])

    with anyio.fail_after(WAIT_S):
        async with sdk_server(reporting) as host:
            await host.call(1, meta={"progressToken": token})
            sdk = await host.line()
            await host.line()
    assert jsonrpc.progress(token, done, total, message) + b"\n" == sdk


@pytest.mark.parametrize("request_id", IDS)
async def test_an_error_answer_is_the_sdks_line(request_id: jsonrpc.RequestId) -> None:
    why = 'emceepee failed inside tools/call: ü "q" \u2028'

    async def failing(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        raise MCPError(code=types.INTERNAL_ERROR, message=why)

    with anyio.fail_after(WAIT_S):
        async with sdk_server(failing) as host:
            await host.call(request_id)
            sdk = await host.line()
    assert (jsonrpc.text(jsonrpc.error(request_id, why, types.INTERNAL_ERROR)) + "\n").encode() == sdk


async def test_an_sdk_backends_answer_to_a_fast_call_is_found_by_its_first_bytes_unparsed() -> None:
    """backends/raw_pipe.py tells which fast call an SDK backend answers from the line's first bytes."""
    sdk = await sdk_line(slow_lane(PLAIN[0]), "ee-fast-1")
    assert sdk.startswith(jsonrpc.RESPONSE_HEAD)
    answers: list[Answer] = []

    async def written(data: bytes) -> None:
        return None

    async def progress(done: float, total: float | None, message: str | None) -> None:
        return None

    async def call() -> None:
        answers.append(await exchanges.call("t", {}, progress))

    exchanges = Exchanges(written)
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()  # its request is written: it waits for the answer
            assert await exchanges.deliver(sdk.rstrip(b"\n"))
    assert [(a.request_id, a.doc) for a in answers] == [("ee-fast-1", None)]


def test_an_id_is_a_string_or_an_integer() -> None:
    assert [jsonrpc.valid_id(v) for v in (1, "1", -(2**70), True, None, 1.0, [1])] == [
        True,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
