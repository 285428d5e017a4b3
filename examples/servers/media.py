"""Example backend "media": tools whose results are not plain text (for `emceepee call`).

Tools
    pixel(color="red")  -> a 1x1 PNG of that color (red, green or blue), as an image block
    note(title)         -> an embedded text resource, a binary one, and a resource link
    report(n)           -> structured content {"n", "squares"} with its JSON as text

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import mcp_types as types
from _example import ToolTable, serve, text_result, tool_table_handlers
from mcp.server import Server, ServerRequestContext

NAME = "media"
COLORS = {"red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255)}


def png(rgb: tuple[int, int, int]) -> bytes:
    """A valid 1x1 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(bytes([0, *rgb]))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


async def pixel(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    data = base64.b64encode(png(COLORS[args.get("color", "red")])).decode()
    return types.CallToolResult(content=[types.ImageContent(data=data, mime_type="image/png")])


async def note(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    title = args["title"]
    return types.CallToolResult(
        content=[
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri=f"note://{title}", mime_type="text/plain", text=f"# {title}"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri=f"note://{title}.bin",
                    mime_type="application/octet-stream",
                    blob=base64.b64encode(b"\x00\x01").decode(),
                )
            ),
            types.ResourceLink(uri=f"note://{title}/more", name="more"),
        ]
    )


async def report(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    n = args["n"]
    value = {"n": n, "squares": [i * i for i in range(1, n + 1)]}
    return text_result(json.dumps(value), structured=value)


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS: ToolTable = {
    "pixel": (
        types.Tool(
            name="pixel",
            description="A 1x1 PNG of one color.",
            input_schema=schema({"color": {"type": "string", "enum": list(COLORS)}}, []),
        ),
        pixel,
    ),
    "note": (
        types.Tool(
            name="note",
            description="Embedded resources (text and binary) and a resource link.",
            input_schema=schema({"title": {"type": "string"}}, ["title"]),
        ),
        note,
    ),
    "report": (
        types.Tool(
            name="report",
            description="Structured content: the first n squares.",
            input_schema=schema({"n": {"type": "integer", "minimum": 1, "maximum": 100}}, ["n"]),
        ),
        report,
    ),
}

on_list_tools, on_call_tool = tool_table_handlers(TOOLS)
server = Server(NAME, version="0.1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)

if __name__ == "__main__":
    serve(server)
