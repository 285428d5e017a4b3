"""Example backend "crashy": a badly behaved MCP server, for testing how emceepee copes.

emceepee's tests spawn it as ``python examples/servers/crashy.py``. It speaks MCP over stdio.

Tools
    ok()                 -> "ok"
    crash(after_ms=0)    -> writes "crashy: about to crash" to stderr, waits ``after_ms``
                            milliseconds, then kills the process with os._exit(3), so the
                            call never gets a response (the backend dies mid-call)
    garbage()            -> writes a line that is not JSON-RPC onto the protocol wire (stdout),
                            then returns "survived"

Environment
    CRASHY_FAIL_AT_START=1   write "crashy: refusing to start" to stderr and exit with
                             status 2 before serving anything (not even initialize)
"""

import os
import sys

# Checked before importing the SDK (which takes most of a second; _example imports it too),
# so a test of a backend that fails at start does not pay for the import.
if __name__ == "__main__" and os.environ.get("CRASHY_FAIL_AT_START") == "1":
    sys.stderr.write("crashy: refusing to start\n")
    sys.stderr.flush()
    sys.exit(2)

from typing import Any, NoReturn

import anyio
import mcp_types as types
from _example import serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

NAME = "crashy"
GARBAGE_LINE = b"crashy: this line is not JSON-RPC\n"

# While stdio_server() is active the SDK points fd 1 at stderr (so stray prints cannot
# corrupt the wire) and writes the protocol through a private duplicate. To put garbage
# on the real wire, the __main__ block keeps its own duplicate of the original stdout here.
wire_fd: int | None = None


async def crash(after_ms: int) -> NoReturn:
    sys.stderr.write("crashy: about to crash\n")
    sys.stderr.flush()
    await anyio.sleep(after_ms / 1000)
    # os._exit skips all cleanup: no response, no flushing, just a dead process and a
    # closed pipe, which is what a real crash looks like from the other side.
    os._exit(3)


async def garbage() -> types.CallToolResult:
    assert wire_fd is not None, "garbage() called without running this file as a script"
    # A small os.write is atomic on a pipe and the SDK flushes each message as a whole, so the
    # junk lands between two JSON lines (this call's own response is only written afterwards).
    os.write(wire_fd, GARBAGE_LINE)
    return text_result("survived")


TOOLS = [
    types.Tool(name="ok", description='Return "ok".', input_schema={"type": "object", "properties": {}}),
    types.Tool(
        name="crash",
        description="Kill this server process (exit status 3) after `after_ms` milliseconds, mid-call.",
        input_schema={
            "type": "object",
            "properties": {"after_ms": {"type": "integer", "minimum": 0, "default": 0}},
        },
    ),
    types.Tool(
        name="garbage",
        description='Write a non-JSON line onto stdout (the protocol wire), then return "survived".',
        input_schema={"type": "object", "properties": {}},
    ),
]


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    args: dict[str, Any] = params.arguments or {}
    if params.name == "ok":
        return text_result("ok")
    if params.name == "crash":
        after_ms = args.get("after_ms", 0)
        # The low-level Server does not validate arguments, so check the one we use.
        if not isinstance(after_ms, int) or isinstance(after_ms, bool) or after_ms < 0:
            return text_result(
                "invalid arguments for crash: 'after_ms' must be an integer >= 0", is_error=True
            )
        await crash(after_ms)
    if params.name == "garbage":
        return await garbage()
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: it crashes and writes garbage on request.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    wire_fd = os.dup(1)  # before serve() starts stdio_server(), which diverts fd 1 to stderr
    serve(server)
