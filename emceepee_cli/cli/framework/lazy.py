"""A command group whose commands are imported only when one is run (or its own help is asked for).

`emceepee --version`, `emceepee --help` and a TAB press on a command name import none of the
command modules: the group lists them, with their one-line help, from `Lazy` entries. Running
`emceepee tasks list` imports `cli.tasks` alone. When a command is loaded its parameters are
given their value completion (`complete.attach`), wherever the command is defined.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup
from typer.models import TyperInfo

from emceepee_cli.cli.framework.typer_api import Command, Context, HelpFormatter, UsageError


@dataclass(frozen=True)
class Lazy:
    """Where a command lives (`module:attribute`, a function or a Typer app) and its one-line help."""

    target: str
    help: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def load(self, name: str) -> Command:
        module, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if isinstance(obj, typer.Typer):
            info = TyperInfo(obj, name=name)
            command: Command = typer.main.get_group_from_info(
                info, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=None
            )
        else:
            single = typer.Typer(add_completion=False, rich_markup_mode=None)
            single.command(name, **self.settings)(obj)
            command = typer.main.get_command(single)
        from emceepee_cli.cli.framework import complete

        complete.attach(command, (name,))
        return command


class LazyGroup(TyperGroup):
    """The `emceepee` group: `LAZY` entries (set by main.py) become commands on first use.

    It suggests a command for a mistyped one itself, from every command, loaded or not: typer's
    own suggestions (off here) see only the loaded ones.
    """

    lazy: Mapping[str, Lazy] = {}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "suggest_commands": False})
        self._listing = False
        self._loaded: dict[str, Command] = {}

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.commands, *(name for name in self.lazy if name not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self.lazy.get(cmd_name)
        if entry is None:
            return None
        if self._listing:  # the list of commands needs only their names and one-line help
            return TyperCommand(cmd_name, help=entry.help, short_help=entry.help, rich_markup_mode=None)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = entry.load(cmd_name)
        return self._loaded[cmd_name]

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def shell_complete(self, ctx: Context, incomplete: str) -> list[Any]:
        self._listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            close = difflib.get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if close:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, close))}?"
            raise
