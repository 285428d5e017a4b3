"""`emceepee fleet`: the per-user process `serve` relays to when the fleet is on (experimental).

`emceepee fleet run` is what a front starts (detached, with `--detach --ready-fd N`: fleet/
starter.py); a person may run it in a terminal as well, to watch its log.
"""

from __future__ import annotations

from typing import Annotated

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, DbOpt

app = typer.Typer(
    help="Experimental: the per-user process serve relays to with EMCEEPEE_FLEET=1.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("run")
def run(
    config: ConfigOpt = None,
    db: DbOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging (to stderr).")] = False,
    ready_fd: Annotated[int | None, typer.Option("--ready-fd", hidden=True)] = None,
    detach: Annotated[bool, typer.Option("--detach", hidden=True)] = False,
) -> None:
    """Run the fleet in the foreground: one MCP session per host connecting to its socket, until no
    host has been connected for [fleet] idle_exit (experimental)."""
    from emceepee_cli import paths
    from emceepee_cli.fleet import starter

    if detach:  # before anything heavy is loaded: the process a front started ends at once
        starter.detach()
    from emceepee_cli.fleet.daemon import run_fleet

    code = run_fleet(paths.config_path(config), paths.db_path(db), ready_fd=ready_fd, verbose=verbose)
    if code:
        raise typer.Exit(code)
