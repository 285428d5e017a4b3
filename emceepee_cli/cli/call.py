"""`emceepee tools` and `emceepee call`: reach backends from a terminal, without a host or a serve.

The backends are started for the command (`calls/oneshot.py`) the way serve starts them, and
stopped when it ends. `call` shows the backend's progress on stderr, prints the result (text as
it is, structured content as JSON, images and other binary blocks saved to files), and asks a
backend's question at the terminal; with no terminal, a form is declined. A remote server that
asks for a sign-in signs in here (cli/auth.py's `Terminal`: the link on stderr and in the
browser), except for `tools` listing every server, which says to run `emceepee auth login`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, JsonOpt
from emceepee_cli.cli.host_vars import from_hosts
from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    import mcp_types as types

    from emceepee_cli.backends.logfile import LogFolder
    from emceepee_cli.config import Config, ServerSpec
    from emceepee_cli.errors import BackendError
    from emceepee_cli.questions.url_questions import UrlElicitationRequired

ServerArg = Annotated[
    str,
    typer.Argument(
        metavar="SERVER", help="A server's name, as `emceepee servers list` shows it.", show_default=False
    ),
]
WaitOpt = Annotated[float, typer.Option("--wait", help="Seconds to wait for the backends to start.")]


def _specs(loaded: Config, server: str | None) -> list[ServerSpec]:
    """The servers to start: the one named (even if disabled), else every enabled one."""
    from dataclasses import replace

    from emceepee_cli.cli.server_rows import problem_text
    from emceepee_cli.errors import ConfigError

    if server is None:
        return [spec for spec in loaded.servers.values() if spec.enabled]
    broken = [problem_text(p, loaded.path) for p in loaded.problems if p.server == server]
    if broken:
        raise ConfigError("; ".join(broken), hint=f"Fix it, then try again (emceepee servers show {server}).")
    spec = loaded.server(server)
    if not spec.enabled:
        render.note(f"('{server}' is disabled in the config; started for this command only)")
    return [replace(spec, enabled=True)]


def _unstartable(loaded: Config) -> list[dict[str, Any]]:
    """A group for each server switched on that the config cannot start (a broken table, a
    `${VAR}` set nowhere), with the reason: `tools` lists it rather than leave it out."""
    from emceepee_cli.cli.server_rows import problem_text, raw_servers

    tables = raw_servers(loaded.path)
    broken: dict[str, list[str]] = {}
    for problem in loaded.problems:
        name = problem.server
        if (
            name is not None
            and name not in loaded.servers
            and tables.get(name, {}).get("enabled") is not False
        ):
            broken.setdefault(name, []).append(problem_text(problem, loaded.path))
    return [{"server": name, "status": "invalid", "error": "; ".join(why)} for name, why in broken.items()]


def tools(
    server: Annotated[
        str | None,
        typer.Argument(
            metavar="SERVER", help="Only this server (default: every enabled one).", show_default=False
        ),
    ] = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern",
            "-p",
            help="Case-insensitive regular expression over names and descriptions.",
            show_default=False,
        ),
    ] = None,
    wait: WaitOpt = 30.0,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """List the backends' tools (started for the command, then stopped).

    A server that cannot be started is listed with the reason. Exits 3 if the server named could
    not be started. A ${VAR} this shell lacks is taken from emceepee's entry in the hosts' configs.
    """
    from emceepee_cli import paths, patterns
    from emceepee_cli.errors import BackendError

    if pattern:
        patterns.compile_pattern(pattern)  # a bad pattern is refused before anything starts
    out = _listing(paths.config_path(config), server, pattern, wait)
    failed = server is not None and any("error" in group for group in out["servers"])
    if json:
        render.as_json(out)
        if failed:
            raise typer.Exit(BackendError.exit_code)
        return
    rows = []
    for group in out["servers"]:
        if "error" in group:
            rows.append((group["server"], f"({group['status']})", group["error"]))
        rows += [(group["server"], t["name"], _first_line(t["description"])) for t in group.get("tools", [])]
    matching = f" match '{pattern}'." if pattern else "."
    empty = "No tools" + matching if out["servers"] else "No servers to start."
    render.table(None, ("server", "tool", "description"), rows, empty=empty)
    for group in out["servers"]:
        if "hint" in group:
            render.note(f"({group['server']}: {group['hint']})")
    if failed:
        raise typer.Exit(BackendError.exit_code)


def _listing(path: Path, server: str | None, pattern: str | None, wait: float) -> dict[str, Any]:
    """What `list_tools` returns for the servers `tools` starts; with no server named, each one
    that cannot be started is listed too, with the reason."""
    import anyio

    from emceepee_cli import config as config_mod
    from emceepee_cli.calls import oneshot
    from emceepee_cli.cli.auth import Terminal

    with from_hosts(path):
        loaded = config_mod.load_config(path)
        specs = _specs(loaded, server)
        logs = oneshot.command_logs("emceepee tools", loaded.defaults)
        person = Terminal() if server is not None else None  # one browser tab, never one per server

        async def listing() -> dict[str, Any]:
            async with oneshot.started(specs, wait_s=wait, logs=logs, sign_in=person) as backends:
                return oneshot.tool_listing(backends.values(), pattern)

        out = anyio.run(listing)
    if server is None:
        out["servers"] += _unstartable(loaded)
    return out


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def call(
    server: ServerArg,
    tool: Annotated[
        str,
        typer.Argument(
            metavar="TOOL", help="The tool's name, as `emceepee tools` shows it.", show_default=False
        ),
    ],
    pairs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NAME=VALUE",
            help="Arguments; a value is JSON where the schema wants a non-string.",
            show_default=False,
        ),
    ] = None,
    args: Annotated[
        str | None,
        typer.Option(
            "--args", help="Arguments as one JSON object (NAME=VALUE pairs win).", show_default=False
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for images and other binary content.")] = Path(
        "."
    ),
    wait: WaitOpt = 30.0,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Call a backend's tool from the terminal.

    The backend is started for the command, then stopped.
    Arguments are checked against the tool's input schema first (nothing is sent if they do not
    match). Progress is shown on stderr; a question the backend asks is asked here. Exits 3 if the
    tool answers with an error.
    """
    import anyio

    from emceepee_cli import config as config_mod
    from emceepee_cli import paths
    from emceepee_cli.calls import oneshot
    from emceepee_cli.cli import asking
    from emceepee_cli.cli.auth import Terminal
    from emceepee_cli.errors import BackendUnavailable
    from emceepee_cli.questions.url_questions import UrlElicitationRequired

    path = paths.config_path(config)
    given = asking.parse_args(args)

    async def run(specs: list[ServerSpec], logs: LogFolder | None) -> types.CallToolResult:
        started = oneshot.started(specs, ask=asking.ask, wait_s=wait, logs=logs, sign_in=Terminal())
        async with started as backends:
            backend = backends[server]
            try:
                backend.require_session()
            except BackendUnavailable as exc:
                hint = (
                    f"Its stderr: emceepee logs {server}. How it is started: emceepee servers show {server} "
                    "(emceepee doctor starts it as a host would)."
                )
                if backend.refusal is not None:  # its server refused emceepee's credentials: what to set
                    hint = backend.refusal.hint or hint
                raise BackendUnavailable(exc.message, hint=hint) from None
            arguments = await oneshot.admit(
                backend, tool, lambda listed: given | asking.pairs_for(listed.input_schema, pairs or [])
            )
            try:
                return await oneshot.call(backend, tool, arguments, asking.ask, asking.progress)
            except UrlElicitationRequired as exc:  # the URLs to open: said, never dropped
                raise _urls_to_open(exc) from None
            finally:
                render.clear_status()

    with from_hosts(path):
        loaded = config_mod.load_config(path)
        result = anyio.run(
            run, _specs(loaded, server), oneshot.command_logs("emceepee call", loaded.defaults)
        )
    _show(result, json, out, tool)


def _urls_to_open(exc: UrlElicitationRequired) -> BackendError:
    """A backend's "URL elicitation required" answer, as the person at the terminal needs it: each
    URL with what the backend says of it, and what to do once it is done."""
    from emceepee_cli.errors import BackendError

    lines = [f"{exc.message}:"]
    for elicitation in exc.elicitations:
        lines += [f"  {elicitation.get('message', '')}".rstrip(), f"  open: {elicitation['url']}"]
    return BackendError(
        "\n".join(lines), hint="Open each URL in a browser and finish there, then run the same command again."
    )


def _show(result: types.CallToolResult, json: bool, out: Path, tool: str) -> None:
    from emceepee_cli.cli.terminal.results import show_result
    from emceepee_cli.errors import BackendError

    if json:  # the result says isError itself: one document, and the exit code
        render.as_json(result.model_dump(by_alias=True, mode="json", exclude_none=True))
        if result.is_error:
            raise typer.Exit(BackendError.exit_code)
        return
    show_result(result, out, tool)
    if result.is_error:
        raise BackendError(
            f"The tool '{tool}' answered with an error (shown above).", hint="Its message says why."
        )
