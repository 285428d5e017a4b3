"""An MCP backend on the legacy HTTP+SSE transport for the tests: prints its port, then serves on
127.0.0.1, its stream at `GET /sse` and its messages at `POST /messages/`.

Tool `echo` answers with its text; tool `whoami` with the Authorization header its POST carried,
so a test can see that emceepee sent the configured (and `${VAR}`-expanded) headers.

`--status 401` (or 403) refuses every request with that status, a `WWW-Authenticate: --challenge`
header when one is given; with `--deny-from tools/call`, only the POSTs of that JSON-RPC method
and every request after it. `--mute` answers the stream's GET but never names the message
endpoint. `GET /counts` answers how many requests of each JSON-RPC method (or HTTP method, for a
request without a JSON-RPC body) each path received, as `"<path> <method>"`, so a test can see
that a refused client is not restarted over and over.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import sys
from collections import Counter
from pathlib import Path

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.sse import SseServerTransport

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's root
from tests.backends.asgi import Receive, Scope, Send, answer, read_body, replay

TOOLS = [
    types.Tool(
        name="echo",
        description="Echoes its text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    ),
    types.Tool(
        name="whoami",
        description="The Authorization header of this request.",
        input_schema={"type": "object", "properties": {}},
    ),
]


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "whoami":
        headers = getattr(ctx.request, "headers", {}) or {}
        text = str(headers.get("authorization", "none"))
    else:
        text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class SseApp:
    """The ASGI app: the SSE stream, its messages, the counts, and refusals when asked for."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.server = Server("sse-echo", on_list_tools=list_tools, on_call_tool=call_tool)
        self.transport = SseServerTransport("/messages/")
        self.counts: Counter[str] = Counter()
        self.denying = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        path, method = scope["path"], scope["method"]
        if path == "/counts":
            await answer(send, 200, {"content-type": "application/json"}, json.dumps(self.counts).encode())
            return
        body = await read_body(receive) if method == "POST" else b""
        self.counts[f"{path} {_method(body) or method}"] += 1
        self.denying = self.denying or self.options.deny_from in (None, _method(body))
        receive = replay(body, receive) if method == "POST" else receive
        if self.options.status and self.denying:
            headers = {"content-type": "text/plain"}
            headers |= {"www-authenticate": self.options.challenge} if self.options.challenge else {}
            await answer(send, self.options.status, headers, b"no entry")
        elif path == "/sse" and method == "GET":
            await self.stream(scope, receive, send)
        elif path.startswith("/messages/"):
            await self.transport.handle_post_message(scope, receive, send)
        else:
            await answer(send, 404, {"content-type": "text/plain"}, b"not found")

    async def stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.options.mute:  # headers of an event stream, then nothing: no endpoint is ever named
            start = {"type": "http.response.start", "status": 200}
            await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": b": hello\n\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        async with self.transport.connect_sse(scope, receive, send) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


def _method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return str(message["method"]) if isinstance(message, dict) and "method" in message else None


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        kind = message["type"].removeprefix("lifespan.")
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--challenge", default=None)
    parser.add_argument("--deny-from", default=None)
    parser.add_argument("--mute", action="store_true")
    options = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(SseApp(options), log_level="warning", timeout_graceful_shutdown=2))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)  # a script's stdout; the port line must not wait
    sys.stdout.reconfigure(line_buffering=True)
    anyio.run(main)
