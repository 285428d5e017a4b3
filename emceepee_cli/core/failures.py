"""A backend's failures, each said in one line however the SDK's task groups wrapped it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import anyio
import mcp_types as types
from mcp import MCPError

from emceepee_cli.errors import EmceepeeError


def leaves(exc: BaseException) -> list[BaseException]:
    """The real exceptions inside (possibly nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def closed(exc: BaseException) -> bool:
    """The connection to the backend was closed under `exc`."""
    return any(isinstance(e, MCPError) and e.code == types.CONNECTION_CLOSED for e in leaves(exc))


def describe(exc: BaseException) -> str:
    """One line for a failure, however deeply the SDK's task groups wrapped it."""
    found = [e for e in leaves(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or [exc]
    first = found[0]
    if isinstance(first, TimeoutError):
        return "timed out waiting for the backend to answer the handshake or listing"
    if isinstance(first, MCPError) and first.code == types.CONNECTION_CLOSED:
        return "the backend closed the connection during start-up"
    if isinstance(first, EmceepeeError):
        return first.message
    return f"{first.__class__.__name__}: {brief(str(first))}"


def brief(text: str, limit: int = 500) -> str:
    """At most a few lines of `text` (a backend's error can quote a whole malformed answer)."""
    lines = text.strip().splitlines()
    short = " / ".join(line.strip() for line in lines[:4]) + (" …" if len(lines) > 4 else "")
    return short if len(short) <= limit else short[:limit] + " …"


def closest(name: str, known: Iterable[str]) -> str:
    """A "did you mean" for a name that is not among `known`; empty when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" Did you mean: {', '.join(close)}?" if close else ""
