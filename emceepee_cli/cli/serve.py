"""`emceepee serve`: the MCP server on stdio, as an MCP host starts it: a relay to the per-user
fleet (emceepee_cli/fleet/front.py), or in-process when the fleet is off or out of reach."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, DbOpt

WAITING = (
    "emceepee serve is waiting for an MCP host on stdin: it speaks MCP (JSON-RPC lines), not commands.\n"
    "An MCP host (Claude Desktop, Claude Code, Cursor, VS Code…) starts it; to add it to one, run: "
    "emceepee install HOST.\n"
    "To check your set-up without a host: emceepee doctor, emceepee tools, emceepee call SERVER TOOL.\n"
    "Stop with Ctrl-D or Ctrl-C."
)


def serve(
    config: ConfigOpt = None,
    db: DbOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging (to stderr).")] = False,
) -> None:
    """Run the MCP server on stdio (what an MCP host starts)."""
    from emceepee_cli import paths
    from emceepee_cli.cli.main import Invocation
    from emceepee_cli.fleet import front  # no SDK: it is loaded only to serve in-process

    Invocation.verbose = Invocation.verbose or verbose
    if sys.stdin.isatty():  # a person typed `emceepee serve`: say why nothing seems to happen
        sys.stderr.write(WAITING + "\n")
        sys.stderr.flush()
    code = front.run(paths.config_path(config), db, verbose)
    if code:
        raise typer.Exit(code)
