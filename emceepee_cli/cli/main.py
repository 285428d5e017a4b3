"""The `emceepee` command: parse, call one function, render. One error boundary, in `main()`.

Exit codes (the same for every command, and in a `--json` error object):

    0  done
    1  a check failed (`doctor`), or an error not listed below
    2  bad input: a usage error, an unknown name or id, a config value that cannot be used
    3  a backend failed or is not available (`call`, `tools`), or its tool answered with an error
       (`call`, `tasks result`), or the task failed (`tasks result`)
    4  the journal cannot be used
    5  the task is still working (`tasks result`)
    6  the task was cancelled (`tasks result`)
    7  the task expired (`tasks result`)
    8  the task was interrupted: the emceepee running it stopped (`tasks result`)
    130  interrupted (Ctrl-C)

Commands are imported only when run (`lazy.py`); this module imports typer and nothing heavy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer
import typer.main

from emceepee_cli import __version__
from emceepee_cli.cli.framework import coercion
from emceepee_cli.cli.framework.lazy import Lazy, LazyGroup
from emceepee_cli.cli.framework.typer_api import ClickException, Command, NoArgsIsHelpError
from emceepee_cli.cli.terminal import render
from emceepee_cli.errors import EmceepeeError

EXIT_INTERRUPTED = 130
coercion.install()

COMMANDS: dict[str, Lazy] = {
    "serve": Lazy("emceepee_cli.cli.serve:serve", "Run the MCP server on stdio (what an MCP host starts)."),
    "install": Lazy(
        "emceepee_cli.cli.install:install", "Add emceepee to an MCP host's config (or remove it)."
    ),
    "import": Lazy(
        "emceepee_cli.cli.install:import_", "Copy the servers of an MCP host's config into emceepee's."
    ),
    "doctor": Lazy(
        "emceepee_cli.cli.doctor:doctor",
        "Check the config, the journal, the install key, every backend, every host and the fleet.",
    ),
    "servers": Lazy(
        "emceepee_cli.cli.servers:app", "List, add, remove, enable and disable backend servers in the config."
    ),
    "tools": Lazy(
        "emceepee_cli.cli.call:tools", "List the backends' tools (started for the command, then stopped)."
    ),
    "call": Lazy("emceepee_cli.cli.call:call", "Call a backend's tool from the terminal."),
    "auth": Lazy(
        "emceepee_cli.cli.auth:app", "Sign in to remote servers, see each one's sign-in, and sign out."
    ),
    "tasks": Lazy(
        "emceepee_cli.cli.tasks:app", "List, inspect and cancel tasks (tool calls that outlived their wait)."
    ),
    "pending": Lazy(
        "emceepee_cli.cli.pending:pending",
        "List the questions backends are waiting on; answer one with: emceepee answer ID.",
    ),
    "answer": Lazy(
        "emceepee_cli.cli.pending:answer",
        "Answer a backend's question: a form, a URL to visit, or a sampling request.",
    ),
    "logs": Lazy("emceepee_cli.cli.logs:logs", "Show (or follow) the backends' stderr logs."),
    "events": Lazy("emceepee_cli.cli.logs:events", "Show (or follow) the journal's events."),
    "journal": Lazy("emceepee_cli.cli.journal:app", "The journal: its health, counts and size."),
    "paths": Lazy(
        "emceepee_cli.cli.journal:paths",
        "Where emceepee keeps its config, journal, logs and key, and the fleet's runtime folder.",
    ),
    "demo": Lazy("emceepee_cli.cli.demo:demo", "Watch emceepee work on its example backends."),
    "fleet": Lazy(
        "emceepee_cli.cli.fleet:app",
        "The per-user process every host's serve relays to when the fleet is on: its status, or stop it.",
    ),
}


class Invocation:
    """What the error boundary needs to know about this run, set while parsing."""

    verbose = False
    json = False


class EmceepeeGroup(LazyGroup):
    lazy = COMMANDS


app = typer.Typer(
    cls=EmceepeeGroup,
    help="emceepee: one MCP server that reaches all of yours.",
    epilog="Exit codes: 0 done; 1 a check failed; 2 bad input; 3 a backend failed; 4 the journal cannot be "
    "used; 5-8 a task has no result (tasks result: working, cancelled, expired, interrupted); "
    "130 interrupted. With --json, an error is a JSON object on stdout. Reference: docs/cli.md",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's context inherits it
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        render.line(f"emceepee {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show a traceback with an error (for bug reports).")
    ] = False,
) -> None:
    """emceepee: one MCP server that reaches all of yours."""
    Invocation.verbose = Invocation.verbose or verbose


def command() -> Command:
    return typer.main.get_command(app)


def wants_json(args: Sequence[str]) -> bool:
    """`--json` given to the command (not after `--`, where a backend's own arguments are)."""
    head = list(args[: args.index("--")] if "--" in args else args)
    return "--json" in head


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; its exit code. Every failure is rendered here, once."""
    args = list(sys.argv[1:] if argv is None else argv)
    Invocation.verbose, Invocation.json = False, wants_json(args)
    try:
        result = command().main(args=args, prog_name="emceepee", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except EmceepeeError as exc:
        if Invocation.verbose:
            raise
        render.error(exc, as_json_error=Invocation.json)
        return exc.exit_code
    except ClickException as exc:
        return _usage(exc, args)
    except (typer.Abort, KeyboardInterrupt, EOFError):
        render.clear_status()
        render.warn("Interrupted.")
        return EXIT_INTERRUPTED


def _usage(exc: ClickException, args: Sequence[str] = ()) -> int:
    """A command line that does not parse: the parser's message, and where to read the usage."""
    if isinstance(exc, NoArgsIsHelpError):
        render.line(exc.format_message())
        return 0
    where = getattr(exc, "ctx", None)
    name = where.command_path if where is not None else "emceepee"
    hint = f"See: {name} --help"
    if name == "emceepee answer" and any(a.lstrip().startswith("{") for a in args):
        hint = "An answer's content is given with --content '{...}'; --json prints the outcome as JSON."
    if Invocation.json:
        render.failure("UsageError", exc.format_message(), hint, exc.exit_code)
    else:
        render.error(EmceepeeError(exc.format_message(), hint))
    return exc.exit_code


def run() -> None:
    sys.exit(main())
