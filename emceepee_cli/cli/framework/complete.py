"""Value completion on TAB: server names, task and question ids, statuses.

Completion is attached by parameter name when a command is loaded (`attach`), so a command gets
it wherever it is defined. Each completer reads only what it needs, cheaply: the config file
with tomllib, the journal read-only with plain sqlite3 (`store/inspect.py`). A completer never
fails: whatever goes wrong, it offers nothing.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.core import TyperGroup

from emceepee_cli.cli.framework.typer_api import (
    Command,
    Completer,
    CompletionItem,
    Context,
    Parameter,
    set_completer,
)


def _given(ctx: Context, name: str) -> Any:
    """The value of option `name` typed so far on this command line, if any."""
    current: Context | None = ctx
    while current is not None:
        if current.params.get(name):
            return current.params[name]
        current = current.parent
    return None


def _items(choices: list[tuple[str, str]], incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(value, help=about) for value, about in choices if value.startswith(incomplete)]


def _guarded(find: Callable[[Context], list[tuple[str, str]]]) -> Completer:
    def complete(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return _items(find(ctx), incomplete)
        except Exception:  # noqa: BLE001  # a TAB press must never print a traceback
            return []

    return complete


def _servers(ctx: Context) -> list[tuple[str, str]]:
    from emceepee_cli import paths

    with paths.config_path(_given(ctx, "config")).open("rb") as fp:
        servers = tomllib.load(fp).get("servers", {})
    return [
        (
            name,
            str(table.get("url") or table.get("command") or "")
            + ("" if table.get("enabled", True) else " (disabled)"),
        )
        for name, table in servers.items()
        if isinstance(table, dict)
    ]


def _db(ctx: Context) -> Path:
    from emceepee_cli import paths

    return paths.db_path(_given(ctx, "db"))


def _tasks(ctx: Context) -> list[tuple[str, str]]:
    from emceepee_cli.store import inspect

    return inspect.task_choices(_db(ctx))


def _questions(ctx: Context) -> list[tuple[str, str]]:
    from emceepee_cli.store import inspect

    return inspect.question_choices(_db(ctx))


def _statuses(ctx: Context) -> list[tuple[str, str]]:
    from emceepee_cli.store.records import TaskStatus

    return [(s.value, "") for s in TaskStatus]


def _hosts(ctx: Context) -> list[tuple[str, str]]:
    from emceepee_cli.hosts import catalog

    return [(h.key, h.title) for h in catalog.HOSTS.values()]


SERVERS, TASKS, QUESTIONS, STATUSES, HOSTS = map(_guarded, (_servers, _tasks, _questions, _statuses, _hosts))


def completer(path: tuple[str, ...], param: str) -> Completer | None:
    """The completer for parameter `param` of the command at `path` (e.g. ("servers", "remove"))."""
    if param == "server" or (param == "name" and path[:1] == ("servers",) and path[1:] != ("add",)):
        return SERVERS
    if param == "task_id":
        return TASKS
    if param == "request_id":
        return QUESTIONS
    if param == "status" and path[:1] == ("tasks",):
        return STATUSES
    if param == "host":
        return HOSTS
    return None


def attach(command: Command, path: tuple[str, ...]) -> None:
    """Give every parameter of `command` (and of its subcommands) its completer, if it has one."""
    for param in command.params:
        found = completer(path, param.name or "")
        if found is not None:
            set_completer(param, found)
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            attach(sub, (*path, name))
