"""The CLI run in this process (so coverage sees it): `cli(*args)` → exit code, stdout, stderr."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from emceepee_cli.cli.main import main

VENV_BIN = str(Path(sys.executable).parent)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(*args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> Ran:
    """`emceepee ARGS…` in-process, with stdin `input` (not a terminal) and `env` overrides."""
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        code = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def example_line(name: str, script: str) -> list[str]:
    """`servers add` arguments for an example backend run by this test's Python."""
    return [
        "servers",
        "add",
        name,
        "--",
        sys.executable,
        str(Path(__file__).resolve().parents[2] / "examples" / "servers" / script),
    ]


def shell_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}
