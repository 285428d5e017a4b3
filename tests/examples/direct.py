"""Drive one example backend directly with the SDK client over stdio (no emceepee in between)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from tests.support import EXAMPLES


def params(script: str, log: Path | None = None) -> StdioServerParameters:
    env = {"EMCEEPEE_EXAMPLE_LOG": str(log)} if log is not None else None
    return StdioServerParameters(command=sys.executable, args=[str(EXAMPLES / script)], env=env)


def direct(script: str, log: Path | None = None, **callbacks: Any) -> Client:
    """An SDK Client for the example, in the handshake era, with the given callbacks."""
    return Client(params(script, log), mode="legacy", **callbacks)


@asynccontextmanager
async def raw_session(
    script: str, log: Path | None = None, **session_args: Any
) -> AsyncIterator[tuple[ClientSession, JSONRPCDispatcher]]:
    """An initialized ClientSession plus its dispatcher, for requests whose results the session would
    reject (a task-augmented tools/call answers with CreateTaskResult, not CallToolResult)."""
    async with stdio_client(params(script, log)) as (read, write):
        dispatcher = JSONRPCDispatcher(read, write)
        async with ClientSession(dispatcher=dispatcher, **session_args) as session:
            await session.initialize()
            yield session, dispatcher


def events(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []
