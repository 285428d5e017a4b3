"""Shared test helpers: example backends, config files, and an in-memory emceepee."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from emceepee_cli.config import load_config
from emceepee_cli.server.app import build_server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "servers"


def example_table(name: str, script: str, **extra: Any) -> str:
    """A [servers.NAME] table running one example backend with this Python."""
    lines = [f"[servers.{name}]", f"command = {json.dumps(sys.executable)}", f"args = [{json.dumps(str(EXAMPLES / script))}]"]
    for key, value in extra.items():
        lines.append(f"{key} = {json.dumps(value) if not isinstance(value, dict) else _inline(value)}")
    return "\n".join(lines) + "\n"


def _inline(table: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


def write_config(path: Path, *tables: str) -> Path:
    path.write_text("\n".join(tables))
    return path


@asynccontextmanager
async def emceepee(config_path: Path, log_dir: Path | None = None) -> AsyncIterator[Client]:
    """emceepee's real server, in memory, with real subprocess backends behind it."""
    server = build_server(load_config(config_path), log_dir)
    async with Client(server, mode="legacy") as client:
        yield client


def payload(result: Any) -> dict[str, Any]:
    """Our own tools' JSON; asserts the text block and structuredContent agree."""
    assert result.structured_content is not None, result
    assert json.loads(result.content[-1].text) == result.structured_content
    return result.structured_content


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]
