"""A handshake-era backend with a fast tool beside tools that ask the client (SDK), as server-everything
has `get-sum` beside its elicitation and sampling tools.

    python tests/backends/asking.py

    get_sum(a, b)   a + b, as text, at once
    ask(tag, gate?)  asks "Question <tag>?" (a form with a required `name`) and answers
                    "<tag>: hello <name>", or "<tag>: <action>" when not accepted; with `gate`,
                    only once the file `gate` exists (several calls in flight, then all ask)
    sample(tag)     asks the client's LLM "Sample <tag>?" and answers "<tag>: <the sample's text>"

Everything diagnostic goes to stderr; stdout is the protocol wire.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

NUMBERS = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
TAGGED = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
TOOLS = [
    types.Tool(name="get_sum", description="a + b, at once", input_schema=NUMBERS),
    types.Tool(name="ask", description="Asks the client a question", input_schema=TAGGED),
    types.Tool(name="sample", description="Asks the client's LLM", input_schema=TAGGED),
]


def text(value: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=value)], is_error=is_error)


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "get_sum":
        return text(str(args.get("a", 0) + args.get("b", 0)))
    tag = str(args.get("tag"))
    try:
        if params.name == "ask":
            while args.get("gate") and not Path(str(args["gate"])).exists():  # noqa: ASYNC110
                await anyio.sleep(0.02)  # the test opens the gate from another process
            form = await ctx.session.elicit_form(
                f"Question {tag}?", NAME_FORM, related_request_id=ctx.request_id
            )
            said = f"hello {(form.content or {}).get('name')}" if form.action == "accept" else form.action
            return text(f"{tag}: {said}")
        message = types.SamplingMessage(role="user", content=types.TextContent(text=f"Sample {tag}?"))
        sampled = await ctx.session.create_message(
            [message], max_tokens=50, related_request_id=ctx.request_id
        )
    except MCPError as exc:
        return text(f"{tag}: failed: {exc.message}", is_error=True)
    content = sampled.content
    return text(f"{tag}: {content.text if isinstance(content, types.TextContent) else content}")


server = Server("asking", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
