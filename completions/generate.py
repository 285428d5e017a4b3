"""Write emceepee's shell completion scripts: python completions/generate.py

The scripts only hand the words typed so far back to `emceepee` (typer answers), so they stay
right as commands change; a test regenerates them and compares with what is committed.
"""

from __future__ import annotations

from pathlib import Path

from emceepee_cli.cli.framework.typer_api import completion_script

SHELLS = ("bash", "zsh", "fish")
HERE = Path(__file__).resolve().parent


def script(shell: str) -> str:
    return completion_script(prog_name="emceepee", complete_var="_EMCEEPEE_COMPLETE", shell=shell) + "\n"


if __name__ == "__main__":
    for shell in SHELLS:
        (HERE / f"emceepee.{shell}").write_text(script(shell))
