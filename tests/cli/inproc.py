"""The CLI run in this process, as `emceepee ARGS…` would run (so coverage sees it): same error
boundary (message and hint on stderr, the error's exit code), stdin not a terminal."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

import typer
from typer.testing import CliRunner

from emceepee_cli.cli import main
from emceepee_cli.cli.framework.typer_api import ClickException
from emceepee_cli.cli.terminal import render
from emceepee_cli.errors import EmceepeeError


@dataclass(frozen=True)
class Ran:
    """What a real process would give: its exit code, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, env: Mapping[str, str | None] | None = None) -> Ran:
    with CliRunner().isolation(env=env) as (out, err, _):
        code = _run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def _run(args: list[str]) -> int:
    try:
        result = main.app(args, prog_name="emceepee", standalone_mode=False)
    except EmceepeeError as exc:
        render.error(exc)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except ClickException as exc:
        exc.show()
        return exc.exit_code
    return result if isinstance(result, int) else 0  # a typer.Exit's code, as main.main returns it
