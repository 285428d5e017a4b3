"""A backend's failures, each said in one line however the SDK's task groups wrapped it.

Where an error came from decides what it means, never its code alone: the SDK's "connection
closed" (-32000) is also the commonest code a backend answers a request with. A backend's own
error answer arrives as `Answered` (backends/dispatcher.py, calls/raw_step.py) and fails that request
alone; only a plain `MCPError(CONNECTION_CLOSED)` from the SDK (or the fast lane) means the
connection ended. `Refused` (`TooLong`, `Unreadable`) is emceepee's own refusal of one answer at the pipe.
`request_error` says how one request failed, for every way but the connection ending (`connection_ended`).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable

import anyio
import mcp_types as types
from mcp import MCPError

from emceepee_cli.errors import BackendError, EmceepeeError, Hints, Step, hints, logs_step
from emceepee_cli.questions import url_questions

log = logging.getLogger(__name__)

_QUOTED_CODE = re.compile(r"^\s*(MCP error\s*)?-?\d+\s*:\s*")  # "MCP error -32602: …", as SDKs prefix it
# What lists the names a request of each kind may use: (meta-tool, CLI command or None).
_LISTING = {
    "tools/call": ("list_tools", "tools"),
    "resources/read": ("list_resources", None),
    "prompts/get": ("list_prompts", None),
}
FAULT_HINT = "This is a fault in the backend; the call was not retried. Its log may say more: {}."


class Answered(MCPError):
    """A backend's own JSON-RPC error answer to one request: that request's failure alone, whatever
    its code (-32000 included)."""


class Refused(Exception):
    """emceepee refused a backend's answer to one request at the pipe (backends/transport.py): that
    request fails with this, never taken for the backend's own error; the connection lives on."""

    detail = ". That call failed; the backend stays connected."  # follows the refusal's own words


class TooLong(Refused):
    """The answer was longer than one message may be, and was skipped unread."""

    detail = (
        ", the most emceepee reads as one message. That call failed and the rest of the answer was "
        "skipped; the backend stays connected."
    )
    hint = "Ask the tool for less at a time (narrower arguments, or its paging if it has any)."

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer was over {limit // (1024 * 1024)} MiB")
        self.limit = limit


class Unreadable(Refused):
    """The answer is not JSON-RPC the SDK's parser reads (a lone surrogate, nesting past its limit)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the answer could not be read as JSON-RPC ({why})")


def leaves(exc: BaseException) -> list[BaseException]:
    """The real exceptions inside (possibly nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def closed(exc: BaseException) -> bool:
    """The connection to the backend was closed under `exc` (not: the backend answered -32000)."""
    return any(_closed(e) for e in leaves(exc))


def _closed(exc: BaseException) -> bool:
    return isinstance(exc, MCPError) and not isinstance(exc, Answered) and exc.code == types.CONNECTION_CLOSED


def describe(exc: BaseException) -> str:
    """One line for a failure, however deeply the SDK's task groups wrapped it."""
    found = [e for e in leaves(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or [exc]
    first = found[0]
    if isinstance(first, TimeoutError):
        return "timed out waiting for the backend to answer the handshake or listing"
    if _closed(first):
        return "the backend closed the connection during start-up"
    if isinstance(first, Answered):
        return f"the backend answered with error {first.code}: {brief(first.message)}"
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


class BackendAnswered(BackendError):
    """A backend's own JSON-RPC error answer to one request: said for a meta-tool's result (message,
    hint), and kept as it came (`answer`: its code, message and data), so that a request passed
    through natively answers the host with the backend's own error (server/native_requests.py)."""

    def __init__(self, server: str, answer: Answered, said: BackendError) -> None:
        super().__init__(said.message, hint=said.hint, cli_hint=said.cli_hint)
        self.server = server
        self.answer = answer


def backend_answered(server: str, what: str, answer: Answered) -> BackendAnswered:
    """The backend's own error answer to `what`, said as `answered_with_error` says it."""
    return BackendAnswered(server, answer, answered_with_error(server, what, answer.code, answer.message))


def answered_with_error(server: str, what: str, code: int, message: str) -> BackendError:
    """A backend's JSON-RPC error for one request, said once (without the code it quotes again), with
    what to do next: for bad arguments or an unknown name, look at what the backend offers."""
    said = brief(_QUOTED_CODE.sub("", message, count=1) or message)
    listing = _LISTING.get(what.split(" ", 1)[0])
    if code in (types.INVALID_PARAMS, types.METHOD_NOT_FOUND, -32002) and listing:
        tool, command = listing
        step = Step(f"{tool}(server='{server}')", f"emceepee {command} {server}" if command else tool)
        said_next = hints("Check the name and arguments against {}, then call again.", step)
    elif code == types.METHOD_NOT_FOUND:
        said_next = hints(f"Backend '{server}' does not support this request.")
    else:
        said_next = hints("This is the backend's own error; {} may say more.", logs_step(server))
    return BackendError(f"Backend '{server}' answered {what} with error {code}: {said}", **said_next)


def fault_hints(server: str) -> Hints:
    """What to do after a backend's answer emceepee cannot use: read its log."""
    return hints(FAULT_HINT, logs_step(server))


def connection_ended(exc: Exception) -> bool:
    """A request failed with `exc` because the connection ended: the SDK's own "connection closed",
    or a broken pipe (never the backend's answer, whatever its code)."""
    return _closed(exc) or isinstance(
        exc, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream
    )


def request_error(server: str, what: str, exc: Exception) -> BackendError:
    """How `what` failed with `exc`, the connection still up: emceepee refused the answer, the backend
    answered with an error (or asks for a URL to be opened first), a bound ran out, or the backend
    sent an answer the SDK rejects."""
    if isinstance(exc, Refused):
        return BackendError(
            f"emceepee refused backend '{server}'s answer to {what}: {exc}{exc.detail}", **fault_hints(server)
        )
    if isinstance(exc, Answered) and (needs_url := url_questions.required(server, what, exc)) is not None:
        return needs_url
    if isinstance(exc, Answered):  # the backend's own error, kept for a request passed through natively
        return backend_answered(server, what, exc)
    if isinstance(exc, MCPError):  # the backend's error for this request alone, or a bound the SDK keeps
        return answered_with_error(server, what, exc.code, exc.message)
    if isinstance(exc, TimeoutError):
        return BackendError(f"Backend '{server}' did not answer {what} in time.")
    log.debug("backend %s: %s failed", server, what, exc_info=exc)  # a malformed answer (pydantic), …
    return BackendError(
        f"Backend '{server}' sent an answer to {what} that emceepee cannot use: {describe(exc)}",
        **fault_hints(server),
    )
