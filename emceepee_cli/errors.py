"""emceepee's own errors: every user-facing failure is one of these.

Each carries a message that names the object, and a hint that names the next thing to do.
The CLI catches them once and prints both; the MCP server turns them into `isError` results.

Who reads a hint decides how the next thing is named: a host's model calls meta-tools
(`list_tools(server='git')`), a person at the terminal runs commands (`emceepee tools git`). An
error that either can meet (raised in code `serve` and the CLI share) carries both: `hint` for
the model, `cli_hint` for the terminal, most often made together by `hints()` from `Step`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class EmceepeeError(Exception):
    """A failure the user can act on. `hint` says how (to a host's model, or to anyone when
    `cli_hint` is None); `cli_hint` says it to a person at the terminal; `exit_code` is the CLI's."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, *, cli_hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.cli_hint = cli_hint

    @property
    def terminal_hint(self) -> str | None:
        """The hint as the CLI prints it."""
        return self.cli_hint or self.hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class ConfigError(EmceepeeError):
    """The config file (or a value given for it) is malformed."""

    exit_code = 2


class UsageError(EmceepeeError):
    """Bad input from the host or the command line: unknown names, invalid arguments."""

    exit_code = 2


class NotFound(UsageError):
    """An unknown server, tool, resource, prompt or id."""


class BackendUnavailable(EmceepeeError):
    """A backend is not ready (starting, restarting, failed, stopped, disabled)."""

    exit_code = 3


class BackendError(EmceepeeError):
    """A backend failed while handling a request (it died, or answered with an error)."""

    exit_code = 3


class JournalError(EmceepeeError):
    """The journal cannot be used: locked, unreadable, or written by a newer emceepee."""

    exit_code = 4


@dataclass(frozen=True)
class Step:
    """One next thing to do, as each surface names it: a meta-tool call, and a command line."""

    tool: str
    command: str


class Hints(TypedDict):
    hint: str
    cli_hint: str


def hints(template: str, *steps: Step) -> Hints:
    """A hint for each surface: `template` with each `{}` filled by a step, as each names it.
    Passed on as keywords: `NotFound(message, **hints("List its tools with {}.", tools_step(s)))`."""
    return {
        "hint": template.format(*(step.tool for step in steps)),
        "cli_hint": template.format(*(step.command for step in steps)),
    }


def tools_step(server: str) -> Step:
    return Step(f"list_tools(server='{server}')", f"emceepee tools {server}")


def logs_step(server: str) -> Step:
    return Step(f"get_logs(server='{server}')", f"emceepee logs {server}")


SERVERS_STEP = Step("list_servers", "emceepee servers list")
