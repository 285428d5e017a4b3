"""The upstream MCP server: the meta-tools over stdio, and a clean shutdown.

Lifecycle of `serve`: log to stderr from the first line (stdout is the protocol wire) → load
the config (a broken file still starts, with zero backends and the error reported) → enter the
lifespan, which starts every backend without waiting for any → answer the host → on stdin EOF,
SIGTERM or SIGINT, stop every backend (each stop is shielded and bounded) and exit. A signal
exits through `os._exit`, because the stdin reader thread cannot be cancelled (SDK guide §7.2).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import stdio_server
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from emceepee_cli import __version__, paths
from emceepee_cli.config import Config, ConfigProblem, Defaults, load_config
from emceepee_cli.core import schema
from emceepee_cli.core.hub import Hub
from emceepee_cli.errors import ConfigError, EmceepeeError, NotFound, UsageError
from emceepee_cli.server.envelope import error_result, payload_result
from emceepee_cli.server.meta_tools import TOOLS, Call

log = logging.getLogger("emceepee")

SHUTDOWN_GRACE_S = 10.0  # backends stop in ≤ ~6 s each, concurrently

INSTRUCTIONS = (
    "emceepee connects you to all of the user's MCP servers through a fixed set of tools. "
    "Start with list_servers, then list_tools (optionally for one server) and call a backend tool with "
    "execute_tool(server, tool, args). Resources and prompts are reached with list_resources/read_resource "
    "and list_prompts/get_prompt. Errors say what to do next."
)


def build_server(config: Config, log_dir: Path | None = None, on_closed: Callable[[], None] | None = None) -> Server[Hub]:
    """The low-level MCP server; its lifespan owns the hub and every backend task."""

    @asynccontextmanager
    async def lifespan(_: Server[Hub]) -> AsyncIterator[Hub]:
        try:
            async with anyio.create_task_group() as tg:
                hub = Hub(config, tg, log_dir)
                hub.start_all()
                try:
                    yield hub
                finally:
                    hub.stop_all()
        finally:
            if on_closed is not None:
                on_closed()

    return Server(
        "emceepee",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )


async def _list_tools(ctx: ServerRequestContext[Hub], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool.as_tool() for tool in TOOLS.values()])


async def _call_tool(ctx: ServerRequestContext[Hub], params: types.CallToolRequestParams) -> types.CallToolResult:
    try:
        tool = TOOLS.get(params.name)
        if tool is None:
            raise NotFound(f"emceepee has no tool '{params.name}'. Its tools: {', '.join(TOOLS)}.",
                           hint="To call a backend's tool, use execute_tool(server, tool, args).")  # fmt: skip
        args = params.arguments or {}
        wrong = schema.problems(args, tool.input_schema, root="arguments")
        if wrong:
            raise UsageError(f"Invalid arguments for {tool.name}:\n- " + "\n- ".join(wrong),
                             hint="Fix the fields named and call again.")  # fmt: skip

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(done, total, message)

        out = await tool.handler(ctx.lifespan_context, args, Call(progress=progress))
    except EmceepeeError as exc:
        return error_result(exc)
    except Exception as exc:  # noqa: BLE001 - a bug must not crash the proxy or leak a traceback upstream
        log.exception("meta-tool %s failed", params.name)
        return error_result(EmceepeeError(f"emceepee failed inside {params.name}: {exc.__class__.__name__}: {exc}",
                                          hint="This is a bug in emceepee; its stderr log has the traceback."))  # fmt: skip
    return out if isinstance(out, types.CallToolResult) else payload_result(out)


def load_or_report(path: Path) -> Config:
    """The config, or (for a file that is not TOML at all) an empty one carrying the error."""
    try:
        return load_config(path)
    except ConfigError as exc:
        log.error("%s", exc)
        return Config(path=path, defaults=Defaults(), servers={}, problems=(ConfigProblem(None, None, str(exc)),))


def run_stdio(config_path: Path, verbose: bool = False) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s emceepee %(levelname)s %(name)s: %(message)s",
    )
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    config = load_or_report(config_path)
    for problem in config.problems:
        log.warning("config: %s", problem)
    log_dir = paths.ensure_private_dir(paths.logs_dir())
    anyio.run(_serve, config, log_dir)


async def _serve(config: Config, log_dir: Path) -> None:
    closed = anyio.Event()
    server = build_server(config, log_dir, on_closed=closed.set)
    async with anyio.create_task_group() as tg:
        if sys.platform != "win32":
            tg.start_soon(_exit_on_signal, tg.cancel_scope, closed)
        async with stdio_server() as (read, write):
            options = server.create_initialization_options(NotificationOptions(tools_changed=False))
            await server.run(read, write, options)
        tg.cancel_scope.cancel()
    log.info("stopped")


async def _exit_on_signal(scope: anyio.CancelScope, closed: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s; stopping backends", signal.Signals(signum).name)
            scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S):
                await closed.wait()
            logging.shutdown()
            os._exit(0)


__all__: list[Any] = ["build_server", "run_stdio", "load_or_report"]
