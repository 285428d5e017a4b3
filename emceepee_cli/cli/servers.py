"""`emceepee servers …`: read and edit the backends in the config file.

Every server in the file is listed, the broken ones too (with what is wrong, naming the file),
so a server never silently disappears. `add` parses its own options; only what follows `--` is
the backend's command, and a bare command name is looked up on the PATH a host gives emceepee.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from emceepee_cli.cli.framework.options import ConfigOpt, JsonOpt
from emceepee_cli.cli.framework.typer_api import Context
from emceepee_cli.cli.host_vars import from_hosts
from emceepee_cli.cli.server_rows import find_row, raw_servers, rows_of, server_row, target
from emceepee_cli.cli.terminal import render

app = typer.Typer(
    help="List, add, remove, enable and disable backend servers in the config.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The server's name.", show_default=False)]
STATUSES = ("enabled", "disabled", "invalid")


class AfterDashDash(TyperCommand):
    """A command whose trailing arguments are taken only after `--`: everything before it is parsed
    as options and arguments (so a mistyped option is an error, never part of the command)."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- COMMAND [ARGS]...]"]

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta["after_dashdash"] = args[:cut], args[cut + 1 :]
        return super().parse_args(ctx, args)


# ---- commands ----------------------------------------------------------------------------------


@app.command("list")
def list_(config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """List every server in the config, broken ones too (with what is wrong)."""
    from emceepee_cli import paths

    path = paths.config_path(config)
    with from_hosts(path) as from_host_files:
        rows, general = rows_of(path)
    if json:
        out: dict[str, Any] = {"servers": rows, "config_problems": general, "config": str(path)}
        out["variables_from_hosts"] = from_host_files
        render.as_json(out)
        return
    render.table(
        f"Servers in {path}",
        ("name", "status", "transport", "target"),
        ((r["name"], r["status"], r["transport"], target(r)) for r in rows),
        empty=f"No servers in {path}. Add one with: emceepee servers add NAME -- COMMAND [ARGS…]",
    )
    _warn_once(path, general + [p for r in rows for p in r.get("problems", [])])


def _warn_once(path: Path, problems: list[str]) -> None:
    """The config's problems, printed once per change of the file (or of the problems); counted after."""
    from emceepee_cli.cli import warned

    if warned.is_new(path, problems):
        for problem in problems:
            render.warn(problem)
    elif problems:
        render.note(
            f"({len(problems)} problem(s) in the config, printed before and unchanged since: "
            "emceepee servers show NAME, or emceepee doctor, shows them)"
        )


@app.command("add", cls=AfterDashDash)
def add(
    ctx: typer.Context,
    name: NameArg,
    url: Annotated[
        str | None,
        typer.Option(help="URL of a remote server (Streamable HTTP; see --sse).", show_default=False),
    ] = None,
    sse: Annotated[
        bool,
        typer.Option(
            "--sse", help='The --url server speaks the legacy HTTP+SSE transport (transport = "sse").'
        ),
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", help="NAME=VALUE for the server's environment; repeatable."),
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="NAME=VALUE HTTP header; repeatable.")
    ] = None,
    cwd: Annotated[
        str | None, typer.Option(help="Working directory for the command.", show_default=False)
    ] = None,
    protocol: Annotated[str, typer.Option(help="legacy, modern or auto.")] = "legacy",
    disabled: Annotated[
        bool, typer.Option("--disabled", help="Add it switched off (enable it later).")
    ] = False,
    no_resolve: Annotated[
        bool,
        typer.Option(
            "--no-resolve",
            help="Keep a bare command name as typed, even if a host would not find it or would run "
            "another program by that name.",
        ),
    ] = False,
    allow_secrets: Annotated[
        bool,
        typer.Option(
            "--allow-secrets",
            help="Save -e, -H and --url values that look like secrets as typed (else refused, "
            "with the ${VAR} form to use).",
        ),
    ] = False,
    replace: Annotated[bool, typer.Option(help="Replace a server of the same name.")] = False,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Add a server: a command after `--`, or --url.

    E.g. `emceepee servers add git -- uvx mcp-server-git`, or `--url https://…` (with `--sse` for a
    server on the legacy HTTP+SSE transport, whose URL often ends in /sse).

    Everything after `--` is the command and its arguments, as they are; everything before it is
    emceepee's. A bare command name that a host would not find, or would find elsewhere (the
    system's python3 rather than a venv's), is saved as its full path in this shell, and said so.
    A value that looks like a secret is refused, with the ${VAR} form to use instead.
    """
    from emceepee_cli.cli import editing

    command: list[str] | None = ctx.meta.get("after_dashdash")
    fields = editing.Fields(name, command, url, env or [], header or [], cwd, protocol, not disabled, sse)
    added = editing.add(
        fields, resolve=not no_resolve, replace=replace, config=config, allow_secrets=allow_secrets
    )
    if json:
        render.as_json(
            {"added": server_row(added.spec), "config": str(added.path), "warnings": added.warnings}
        )
        return
    for warning in added.warnings:
        render.warn(warning)
    state = "" if added.spec.enabled else " (disabled: enable it with `emceepee servers enable " + name + "`)"
    render.line(
        f"Added '{name}' to {added.path}{state}. A running `emceepee serve` starts it within a few seconds."
    )


@app.command("remove")
def remove(name: NameArg, config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """Remove a server from the config."""
    from emceepee_cli import config as config_mod
    from emceepee_cli import paths

    path = config_mod.remove_server(name, paths.config_path(config))
    if json:
        render.as_json({"removed": name, "config": str(path)})
        return
    render.line(f"Removed '{name}' from {path}. A running `emceepee serve` stops it within a few seconds.")


@app.command("enable")
def enable(name: NameArg, config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """Switch a server on (a running serve starts it within a few seconds)."""
    _switch(name, True, config, json)


@app.command("disable")
def disable(name: NameArg, config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """Switch a server off, keeping its settings (a running serve stops it within a few seconds)."""
    _switch(name, False, config, json)


def _switch(name: str, on: bool, config: Path | None, json: bool) -> None:
    from emceepee_cli import paths
    from emceepee_cli.cli import editing

    with from_hosts(paths.config_path(config)):
        path, changed, problems = editing.switch(name, on, config)
    state = "enabled" if on else "disabled"
    if json:
        render.as_json(
            {"name": name, "enabled": on, "changed": changed, "config": str(path), "problems": problems}
        )
        return
    render.line(f"'{name}' is {'now' if changed else 'already'} {state} in {path}.")
    for problem in problems:
        render.warn(problem)


@app.command("show")
def show(name: NameArg, config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """Show one server's settings (secrets hidden).

    As written in the config, with where its command is found (for a host, and in this shell)
    and where its log is.
    """
    from emceepee_cli import paths
    from emceepee_cli.cli import editing
    from emceepee_cli.hosts.entry_env import referred

    path = paths.config_path(config)
    with from_hosts(path) as from_host_files:
        table = raw_servers(path).get(name, {})
        details = editing.details(find_row(name, path), table, path)
    used = {var: file for var, file in from_host_files.items() if var in referred(table)}
    if used:
        details["variables_from_hosts"] = used
    if json:
        render.as_json({"server": details})
        return
    problems = details.pop("problems", [])
    render.fields([(key, shown(value)) for key, value in details.items()])
    if problems:  # each a sentence of its own, as written
        render.line("problems:")
        for problem in problems:
            render.line(f"  - {problem}")


def shown(value: Any) -> str:
    """A setting's value as `servers show` prints it: text as it is, anything else as JSON (as
    `--json` and the config's own syntax write it: `true`, `["--repo", "~/src"]`)."""
    import json as jsonlib

    if value is None:
        return "(not found)"
    return value if isinstance(value, str) else jsonlib.dumps(value, ensure_ascii=False)
