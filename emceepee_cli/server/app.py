"""The upstream MCP server: the meta-tools over stdio, and a clean shutdown.

Lifecycle of `serve`: log to stderr from the first line (stdout is the protocol wire) → load
the config (a broken file still starts, with zero backends and the error reported) → enter the
lifespan, which starts every backend without waiting for any → answer the host over the wire of
`server/stdio.py` (every line it sends gets an answer, a bad one a JSON-RPC error) → on stdin EOF,
SIGTERM or SIGINT, stop every backend (each stop is shielded and bounded) and exit. A signal
exits through `os._exit`, because the stdin reader thread cannot be cancelled (SDK guide §7.2).
Meanwhile a change of the config file, or a SIGHUP, reloads it (server/reload.py). The host's
native requests besides tools (resources, prompts, completion, the logging level) are answered in
server/native_requests.py; the protocol's own Tasks (`tasks/*`, a task-augmented call) in
server/native_tasks.py.
"""

from __future__ import annotations

import gc
import logging
import os
import shlex
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pydantic
from mcp import MCPError
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli import __version__, paths, processes, schema
from emceepee_cli.backends.launch import Launch
from emceepee_cli.calls import spool
from emceepee_cli.calls.call import InputRound, Passed, Relay
from emceepee_cli.calls.host_rounds import HostRetry
from emceepee_cli.config import Config, ConfigProblem, Defaults, load_config
from emceepee_cli.errors import ConfigError, EmceepeeError, NotFound, UsageError
from emceepee_cli.ids import new_id
from emceepee_cli.redact import RedactingFormatter
from emceepee_cli.server import native_requests, reload
from emceepee_cli.server.envelope import Reply, error_result, payload_result, with_envelope
from emceepee_cli.server.fastlane import FastLane
from emceepee_cli.server.meta_tools import TOOLS, Call, MetaTool
from emceepee_cli.server.native_tasks import NativeTasks, TasksServer, task_support
from emceepee_cli.server.resume_wire import resume_tokens
from emceepee_cli.server.stdio import host_streams
from emceepee_cli.session import roots_round, wiring
from emceepee_cli.session.pool import Pool
from emceepee_cli.session.wiring import Services
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.faults import serving_from_memory
from emceepee_cli.store.journal import Journal

log = logging.getLogger("emceepee")

SHUTDOWN_GRACE_S = 10.0  # backends stop in ≤ ~6 s each, concurrently
SWEEP_BOUND_S = 3.0  # then what they started and left (backends/descendants.py): ≤ ~1.5 s

INSTRUCTIONS = (
    "emceepee connects you to all of the user's MCP servers through a fixed set of tools. "
    "Start with list_servers, then list_tools (optionally for one server) and call a backend tool with "
    "execute_tool(server, tool, args). Resources and prompts are reached with list_resources/read_resource "
    "and list_prompts/get_prompt. Errors say what to do next."
)


def build_server(
    config: Config,
    log_dir: Path | None = None,
    on_closed: Callable[[], None] | None = None,
    db_path: Path | None = None,
    follow_config: bool = False,
    fast_lane: FastLane | None = None,
    launch: Launch | None = None,
    pool: Pool | None = None,
    instance_id: str | None = None,
    previous: str | None = None,
) -> Server[Services]:
    """The low-level MCP server; its lifespan owns the journal, the services and every backend task.

    `follow_config`: reload the config file when it changes or on SIGHUP (server/reload.py).
    `launch`: this is one host's session in the fleet (emceepee_cli/fleet/daemon.py), whose
    backends start in that host's environment and cwd, and which leaves SIGHUP to the fleet;
    `pool`: the fleet's backends, shared by its sessions (session/pool.py); `instance_id`: the
    session's id in the journal (default: a new one); `previous`: the session its host had in a
    fleet that died, whose calls and events it takes over (and no other dead instance's)."""

    @asynccontextmanager
    async def lifespan(_: Server[Services]) -> AsyncIterator[Services]:
        try:
            journal = AsyncJournal(await anyio.to_thread.run_sync(Journal.for_serve, db_path))
            if journal.fault is not None:  # said once here; every reply says it too (server/envelope.py)
                log.error("journal: %s", serving_from_memory(journal.fault))
            session_id = instance_id or new_id()
            try:
                inherited = await wiring.take_over(journal, session_id, previous, in_fleet=launch is not None)
                async with anyio.create_task_group() as tg:
                    services = wiring.build(config, tg, journal, session_id, log_dir, launch, pool)
                    await services.start(inherited)
                    hangup = launch is None
                    following = reload.follow(services, config.path, hangup) if follow_config else None
                    why = "it was told to stop"  # a signal: see _exit_on_signal
                    if fast_lane is not None:
                        fast_lane.attach(services)
                    try:
                        yield services
                        why = "the host closed its connection"
                    finally:
                        if fast_lane is not None:
                            fast_lane.attach(None)
                        if following is not None:
                            following.cancel()
                        services.stop(why)
                with anyio.CancelScope(shield=True), anyio.move_on_after(SWEEP_BOUND_S):
                    await services.descendants.sweep()  # what the backends' stops could not find
            finally:
                await journal.shutdown(session_id)
        finally:
            if on_closed is not None:
                on_closed()

    server = TasksServer(
        "emceepee",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=native_requests.list_resources,
        on_read_resource=native_requests.read_resource,
        on_list_resource_templates=native_requests.list_resource_templates,
        on_subscribe_resource=native_requests.subscribe,
        on_unsubscribe_resource=native_requests.unsubscribe,
        on_list_prompts=native_requests.list_prompts,
        on_get_prompt=native_requests.get_prompt,
        on_completion=native_requests.complete,
    )
    # logging/setLevel is deprecated as of 2026-07-28 (the constructor keyword warns); it is what
    # every handshake-era host uses.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, native_requests.set_level)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, _initialized)
    server.middleware.append(_answer_always)  # outermost: a handler's bug is still an answer
    server.middleware.append(resume_tokens)  # a task's resume token also where the proposal puts it
    server.middleware.append(roots_round.refuse_malformed_roots)  # with the field that is wrong
    NativeTasks(_note_host).register(server)  # the protocol's own Tasks (server/native_tasks.py)
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, _roots_changed
    )
    return server


async def _answer_always(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Whatever a request's handler raises, the host gets an answer: the SDK would write a bug's
    own text with code 0; this logs the traceback to stderr and answers -32603, briefly."""
    try:
        return await call_next(ctx)
    except (MCPError, pydantic.ValidationError):  # the SDK answers these as they should be
        raise
    except Exception as exc:
        if ctx.request_id is None:
            raise  # a notification: the SDK logs it, and there is nobody to answer
        log.exception("the %s handler failed on request %r", ctx.method, ctx.request_id)
        message = (
            f"emceepee failed inside {ctx.method} ({exc.__class__.__name__}); its stderr log has the details"
        )
        raise MCPError(code=types.INTERNAL_ERROR, message=message) from exc


async def _initialized(ctx: ServerRequestContext[Services], params: types.NotificationParams) -> None:
    """The host finished the handshake: keep its connection, to forward questions from now on."""
    _note_host(ctx, ctx.lifespan_context)


async def _roots_changed(ctx: ServerRequestContext[Services], params: types.NotificationParams) -> None:
    """The host's roots changed: backends that see them are told."""
    ctx.lifespan_context.roots.host_changed()


async def _list_tools(
    ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    own = [task_support(tool.as_tool()) for tool in TOOLS.values()]
    direct = ctx.lifespan_context.direct
    if not direct.any:
        return types.ListToolsResult(tools=own)
    await ctx.lifespan_context.native.settled()  # a host lists once at start: show what is coming up
    return types.ListToolsResult(tools=[*own, *direct.tools()])


async def _call_tool(
    ctx: ServerRequestContext[Services], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    services = ctx.lifespan_context
    _note_host(ctx, services)
    wants_progress = bool(ctx.meta and ctx.meta.get("progress_token") is not None)
    relay = Relay(ctx.session.report_progress) if wants_progress else None
    result, own = await dispatch(services, params.name, params.arguments, _upstream_call(ctx, params, relay))
    if isinstance(result, InputRound):  # the envelope waits for the next reply that has content
        return result.result()
    if isinstance(result, Passed):
        result = result.model()
    events, pending = services.events.take(), services.questions.for_client()
    return with_envelope(result, events, pending, own=own, journal_fault=services.journal.fault)


def _upstream_call(
    ctx: ServerRequestContext[Services], params: types.CallToolRequestParams, relay: Relay | None
) -> Call:
    """The request as a handler sees it. A 2026-07-28 host's request brings what it can answer, read
    from this very request (calls/host_rounds.py); with a round's state or answers it is a retry."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return Call(relay=relay)  # a handshake-era host is asked by forwarding (questions/host_link.py)
    asks = ctx.session.client_capabilities or types.ClientCapabilities()
    if params.request_state is None and params.input_responses is None:
        return Call(relay=relay, asks=asks)
    return Call(relay=relay, asks=asks, retry=HostRetry(params.request_state, params.input_responses))


async def dispatch(
    services: Services, name: str, arguments: dict[str, Any] | None, call: Call
) -> tuple[types.CallToolResult | Passed | InputRound, bool]:
    """The tool's result, and whether it is our own (False: a backend's, passed through). The
    fast lane (server/fastlane.py) calls this too, so both lanes answer alike."""
    try:
        target = None if name in TOOLS else await services.direct.resolve_started(name)
        tool, args = _checked(name, arguments, target)
        out = await tool.handler(services, args, call)
    except EmceepeeError as exc:
        return error_result(exc), True
    except Exception as exc:  # a bug must not crash the proxy or leak a traceback upstream
        log.exception("meta-tool %s failed", name)
        return error_result(
            EmceepeeError(
                f"emceepee failed inside {name}: {exc.__class__.__name__}: {exc}",
                hint="This is a bug in emceepee; its stderr log has the traceback.",
            )
        ), True
    if isinstance(out, types.CallToolResult | Passed | InputRound):
        return out, False
    if isinstance(out, Reply):
        return payload_result(out.payload, out.summary), True
    return payload_result(out), True


def _checked(
    name: str, arguments: dict[str, Any] | None, target: tuple[str, str] | None
) -> tuple[MetaTool, dict[str, Any]]:
    """The meta-tool called, and its arguments once they match its schema. A backend tool listed
    directly (`server__tool`, resolved to `target`) is an execute_tool call, so it takes exactly
    the same path."""
    tool = TOOLS.get(name)
    if target is not None:
        server, backend_tool = target
        return TOOLS["execute_tool"], {"server": server, "tool": backend_tool, "args": arguments or {}}
    if tool is None:
        raise NotFound(
            f"emceepee has no tool '{name}'. Its tools: {', '.join(TOOLS)}.",
            hint="To call a backend's tool, use execute_tool(server, tool, args).",
        )
    args = arguments or {}
    wrong = schema.problems(args, tool.input_schema, root="arguments")
    if wrong:
        raise UsageError(
            f"Invalid arguments for {tool.name}:\n- " + "\n- ".join(wrong),
            hint="Fix the fields named and call again.",
        )
    return tool, args


def _note_host(ctx: ServerRequestContext[Services], services: Services) -> None:
    """Keep the host's connection (to forward questions) and record which host this is, once."""
    info = services.host.note(ctx.session)
    if info is not None:
        services.roots.host_connected()
        name, version = info.name, info.version
        services.runtime.write(
            services.journal, services.journal.sync.instances.set_host, services.instance_id, name, version
        )


def load_or_report(path: Path, environ: Mapping[str, str] | None = None, cwd: str | None = None) -> Config:
    """The config, or (for a file that is not TOML at all) an empty one carrying the error.
    `environ`: where `${VAR}` is looked up, and `cwd` where a relative root starts (default
    emceepee's own; in the fleet, the host's)."""
    try:
        return load_config(path, environ, cwd)
    except ConfigError as exc:
        log.error("%s", exc)
        return Config(
            path=path, defaults=Defaults(), servers={}, problems=(ConfigProblem(None, None, str(exc)),)
        )


def run_stdio(
    config_path: Path, verbose: bool = False, db_path: Path | None = None, notice: str | None = None
) -> None:
    """`serve` in this process. `notice`: why it is not served through the fleet, said once."""
    log_to_stderr(verbose)
    if notice is not None:
        log.warning("serving in-process (no fleet): %s", notice)
    config = load_or_report(config_path)
    for problem in config.problems:
        log.warning("config: %s", problem)
    log_dir = logs_folder()
    prepare_process()
    # What a backend starts and orphans stays below serve (backends/descendants.py).
    processes.become_subreaper()
    anyio.run(_serve, config, log_dir, db_path)


def log_to_stderr(verbose: bool) -> None:
    """Every log line to stderr, secrets redacted (stdout is the protocol wire, or the fleet's log)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s emceepee %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


def prepare_process() -> None:
    """What a process that serves does once, before serving: result files a serve that died left
    behind are swept, big allocations mapped so their memory can go back, and what is loaded by now
    (the SDK, emceepee) frozen, so the collector no longer walks it on every collection, which calls
    in flight trigger often."""
    spool.BUDGET.sweep()
    spool.map_big_allocations()
    gc.freeze()


def logs_folder() -> Path | None:
    """The folder of the backends' stderr logs, made if need be; None when it cannot be made
    (a read-only data folder): serve runs all the same, with their stderr in memory only."""
    folder = paths.logs_dir()
    try:
        return paths.ensure_private_dir(folder)
    except OSError as exc:
        blocking = paths.unwritable_folder(folder) or folder.parent
        log.error(
            "cannot make the folder of the backends' stderr logs %s: %s; their stderr is kept in memory "
            "only (get_logs) until emceepee restarts. To fix: chmod u+w %s",
            folder,
            exc.strerror or exc,
            shlex.quote(str(blocking)),
        )
        return None


async def _serve(config: Config, log_dir: Path | None, db_path: Path | None) -> None:
    closed = anyio.Event()
    lane = FastLane(dispatch)
    server = build_server(
        config, log_dir, on_closed=closed.set, db_path=db_path, follow_config=True, fast_lane=lane
    )
    async with anyio.create_task_group() as tg:
        if sys.platform != "win32":
            tg.start_soon(_exit_on_signal, tg.cancel_scope, closed)
        async with host_streams(lane) as (read, write):
            await server.run(read, write, serving_options(server))
        tg.cancel_scope.cancel()
    log.info("stopped")


def serving_options(server: Server[Services]) -> InitializationOptions:
    """What the server says of itself at the handshake: every list may change while it runs."""
    changes = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    return server.create_initialization_options(changes)


async def _exit_on_signal(scope: anyio.CancelScope, closed: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s; stopping backends", signal.Signals(signum).name)
            scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S):
                await closed.wait()
            logging.shutdown()
            os._exit(0)
