"""emceepee's own errors: every user-facing failure is one of these.

Each carries a message that names the object, and a hint that names the next thing to do.
The CLI catches them once and prints both; the MCP server turns them into `isError` results.
"""

from __future__ import annotations


class EmceepeeError(Exception):
    """A failure the user can act on. `hint` says how; `exit_code` is the CLI's."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

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
