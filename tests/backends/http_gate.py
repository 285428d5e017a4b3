"""A Streamable HTTP MCP backend behind a gate that refuses its clients: prints its port, then
serves on 127.0.0.1.

From the first request of method `--deny-from` on (`initialize`: from the start; `tools/call`:
once the client is connected and listed), every request is answered with HTTP `--status` (401 or
403), a `WWW-Authenticate: --challenge` header when one is given, and a plain-text body (or, with
`--json-body`, a JSON-RPC error body, as some servers send). A hostile challenge may quote the
client's own credentials back: `{authorization}` in it stands for the Authorization header the
request carried. A request carrying `--accept` as its Authorization header is never refused.
Otherwise, before the refusals begin, the real MCP server behind the gate answers (tool `echo`, at
`/mcp`).

`GET /counts` answers how many requests of each JSON-RPC method (or HTTP method, for a request
without a JSON-RPC body) each path received, as `"<path> <method>"`, so a test can see that a
refused client is not restarted over and over.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's root
from tests.backends.asgi import App, Receive, Scope, Send, answer, read_body, replay

ECHO = types.Tool(
    name="echo",
    description="Echoes its text.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
)


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


class Gate:
    """The ASGI app in front of the MCP server: counts requests, and refuses them once asked to."""

    def __init__(self, inner: App, options: argparse.Namespace) -> None:
        self.inner = inner
        self.options = options
        self.denying = False
        self.counts: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)  # the lifespan of the MCP server's session manager
            return
        if scope["path"] == "/counts":
            await answer(send, 200, {"content-type": "application/json"}, json.dumps(self.counts).encode())
            return
        body = await read_body(receive) if scope["method"] == "POST" else b""
        method = _method(body) or scope["method"]
        self.counts[f"{scope['path']} {method}"] += 1
        self.denying = self.denying or method == self.options.deny_from
        sent = dict(scope["headers"]).get(b"authorization", b"").decode()
        if self.denying and sent != self.options.accept:
            await self.refuse(send, body, sent)
            return
        await self.inner(scope, replay(body, receive), send)

    async def refuse(self, send: Send, body: bytes, authorization: str) -> None:
        headers = {"content-type": "text/plain"}
        if self.options.challenge:
            headers["www-authenticate"] = self.options.challenge.replace("{authorization}", authorization)
        text = b"no entry"
        if self.options.json_body:
            headers["content-type"] = "application/json"
            request_id = _id(body)
            error = {"code": -32001, "message": "no entry for this token"}
            text = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        await answer(send, self.options.status, headers, text)


def _method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return str(message["method"]) if isinstance(message, dict) and "method" in message else None


def _id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, default=401)
    parser.add_argument("--deny-from", default="initialize")
    parser.add_argument("--challenge", default=None)
    parser.add_argument("--json-body", action="store_true")
    parser.add_argument("--accept", default=None)
    options = parser.parse_args()
    inner = Server("gated", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(Gate(inner, options), log_level="warning"))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)  # a script's stdout; the port line must not wait
    sys.stdout.reconfigure(line_buffering=True)
    anyio.run(main)
