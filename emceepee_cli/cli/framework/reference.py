"""The CLI reference (docs/cli.md), generated from the commands themselves.

`python docs/generate.py` writes it; a test regenerates it and compares, so the reference cannot
drift from the code. Every command is loaded here, so this module is for generating, not for
running commands.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import typer
from typer.core import TyperGroup

from emceepee_cli.cli.framework.typer_api import Command

HEADER = """# emceepee command reference

Generated from the commands by `python docs/generate.py`; do not edit by hand.

Every command takes `--help`. Commands that print take `--json`: they then print one JSON
document (the same objects the meta-tools return), and an error is a JSON object too:
`{"error": {"type", "message", "hint"}, "exit_code": N}`. Exit codes: 0 done; 1 a check failed
(`doctor`); 2 bad input (usage, unknown name or id, a value that cannot be used); 3 a backend
failed or answered with an error (or, for `tasks result`, the task failed); 4 the journal cannot be
used; 130 interrupted. `tasks result` of a task with no result: 5 still working, 6 cancelled,
7 expired, 8 interrupted (the emceepee running it stopped).
"""


def _walk(command: Command, ctx: typer.Context) -> Iterator[tuple[Command, typer.Context]]:
    yield command, ctx
    if isinstance(command, TyperGroup):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, typer.Context(sub, info_name=name, parent=ctx))


def _section(command: Command, ctx: typer.Context) -> list[str]:
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"## {ctx.command_path}", "", "```text", usage, "```", ""]
    if command.help:
        lines += [inspect.cleandoc(command.help).replace("\b\n", ""), ""]
    if command.epilog:
        lines += [inspect.cleandoc(command.epilog), ""]
    records = [r for p in command.get_params(ctx) if (r := p.get_help_record(ctx)) and p.name != "help"]
    if isinstance(command, TyperGroup):
        subs = [
            (n, c) for n in command.list_commands(ctx) if (c := command.get_command(ctx, n)) and not c.hidden
        ]
        lines += [f"- `{ctx.command_path} {n}`: {c.get_short_help_str(200)}" for n, c in subs] + [""]
    if records:
        lines += ["| option | |", "|---|---|"]
        lines += [f"| `{decl}` | {_cell(text)} |" for decl, text in records] + [""]
    return lines


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown() -> str:
    from emceepee_cli.cli.main import command

    root = command()
    ctx = typer.Context(root, info_name="emceepee")
    lines = [HEADER]
    for cmd, cmd_ctx in _walk(root, ctx):
        lines += _section(cmd, cmd_ctx)
    return "\n".join(lines).rstrip() + "\n"
