"""The `emceepee` command: parse, call one function, render. One error boundary, in `run()`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from emceepee_cli import __version__, paths
from emceepee_cli.cli import demo, pending, render, servers, tasks
from emceepee_cli.cli.options import ConfigOpt, DbOpt
from emceepee_cli.errors import EmceepeeError

app = typer.Typer(
    help="emceepee: one MCP server that reaches all of yours.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
app.add_typer(servers.app, name="servers")
app.add_typer(tasks.app, name="tasks")
app.command("demo")(demo.demo)
app.command("pending")(pending.pending)
app.command("answer")(pending.answer)


def _version(value: bool) -> None:
    if value:
        render.line(f"emceepee {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """emceepee: one MCP server that reaches all of yours."""


@app.command()
def serve(
    config: ConfigOpt = None,
    db: DbOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging (to stderr).")] = False,
) -> None:
    """Run the MCP server on stdio (what an MCP host starts)."""
    from emceepee_cli.server.app import run_stdio  # keeps the SDK server off the other commands' start-up

    run_stdio(paths.config_path(config), verbose=verbose, db_path=db)


def run() -> None:
    try:
        app()
    except EmceepeeError as exc:
        if "--verbose" in sys.argv or "-v" in sys.argv:
            raise
        render.error(exc)
        sys.exit(exc.exit_code)
