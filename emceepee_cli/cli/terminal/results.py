"""A tool's result in a terminal: text as it is, structured content as JSON, binary content in files.

An image, an audio clip or a binary resource is written to a new file in the `--out` folder
(never over an existing one), named after the tool, and its path is printed where it was. Text
that merely repeats the structured content (a server often sends both) is printed once.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    import mcp_types as types


def show_result(result: types.CallToolResult, out: Path | None, tool: str, indent: str = "") -> None:
    """Print `result`; its binary content is saved in the folder `out` (None: only described)."""
    import mcp_types as types

    def say(text: str) -> None:
        for part in text.splitlines() or [""]:
            render.line(indent + part)

    structured = result.structured_content
    for block in result.content:
        if isinstance(block, types.TextContent):
            if structured is None or not _same_json(block.text, structured):
                say(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            say(f"[{block.type} {block.mime_type}{_kept(out, tool, block.mime_type, block.data)}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                say(f"[resource {resource.uri}]")
                say(resource.text)
            else:
                say(f"[resource {resource.uri}{_kept(out, tool, resource.mime_type, resource.blob)}]")
        elif isinstance(block, types.ResourceLink):
            say(f"[resource link {block.uri}" + (f" ({block.name})" if block.name else "") + "]")
        else:
            say(json.dumps(block.model_dump(by_alias=True, mode="json", exclude_none=True)))
    if structured is not None:
        say(json.dumps(structured, indent=2, ensure_ascii=False))


def _kept(out: Path | None, tool: str, mime_type: str | None, data: str) -> str:
    if out is None:
        size = len(base64.b64decode(data, validate=False))
        return f", {size} bytes, not saved: `emceepee tasks result` saves it"
    return f", saved to {save(out, tool, mime_type, data)}"


def _same_json(text: str, structured: Any) -> bool:
    try:
        return bool(json.loads(text) == structured)
    except ValueError:
        return False


def save(folder: Path, tool: str, mime_type: str | None, data: str) -> Path:
    """Write base64 `data` to a new file in `folder`; its path."""
    from emceepee_cli.errors import UsageError

    extension = mimetypes.guess_extension(mime_type or "") or ".bin"
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in tool) or "result"
    folder = folder.expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(1, 10_000):
            path = folder / f"{stem}-{n}{extension}"
            try:
                with path.open("xb") as fp:  # "x": never over an existing file
                    fp.write(base64.b64decode(data, validate=False))
            except FileExistsError:
                continue
            return path
    except OSError as exc:
        raise UsageError(
            f"Cannot save the result's content in {folder}: {exc.strerror}.",
            hint="Give another folder with --out.",
        ) from None
    raise UsageError(
        f"{folder} already holds 9999 results of '{tool}'.", hint="Give another folder with --out."
    )
