"""Journal rows that do not decode: damage inside a file that SQLite itself reads as sound.

A column holding JSON that is not JSON (cut, NUL bytes, a stray control character), JSON of the
wrong shape, or a value of the wrong type: each reader that meets one raises `UnreadableRow`
naming the row. What happens next is the reader's choice, made where it reads: an event is skipped
(the rest are delivered), a task's progress is left out, a call that cannot be re-driven ends
failed, and a meta-tool that needed the row answers with this error. Each row is logged once per
process, however often it is read; the row itself is left in the file as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from emceepee_cli.errors import JournalError

log = logging.getLogger(__name__)

HINT = (
    "emceepee leaves the row as it is and goes on without it; `emceepee journal status` checks the "
    "whole file."
)
_logged: set[str] = set()  # the rows already logged by this process
R = TypeVar("R")
T = TypeVar("T")


class UnreadableRow(JournalError):
    """A journal row whose columns do not decode; `what` names the row."""

    def __init__(self, what: str, why: object) -> None:
        super().__init__(f"The journal's {what} cannot be read (damaged): {why}.", hint=HINT)
        self.what = what


def json_column(value: object, what: str, shape: type = dict) -> Any:
    """A JSON column's value, which must decode to `shape`; `UnreadableRow` naming `what` if not."""
    try:
        decoded = json.loads(value)  # type: ignore[arg-type]  # a damaged row may hold any type
    except (TypeError, ValueError) as exc:  # not text, not JSON, not UTF-8
        raise UnreadableRow(what, exc) from exc
    if not isinstance(decoded, shape):
        raise UnreadableRow(what, f"JSON {type(decoded).__name__} where a {shape.__name__} belongs")
    return decoded


def text(value: object, what: str, *, optional: bool = False) -> Any:
    """A text column's value, checked: a damaged row may hold a number, a blob or NULL."""
    if isinstance(value, str) or (optional and value is None):
        return value
    raise UnreadableRow(what, f"{type(value).__name__} where text belongs")


def skipped(exc: UnreadableRow) -> None:
    """Log, once per row and process, that a reader went on without this row."""
    if exc.what not in _logged:
        _logged.add(exc.what)
        log.error("journal: %s It is skipped.", exc.message)


def readable(rows: Iterable[R], decode: Callable[[R], T]) -> list[T]:
    """Each row decoded, without those that do not decode (each logged once, by `skipped`)."""
    out = []
    for row in rows:
        try:
            out.append(decode(row))
        except UnreadableRow as exc:
            skipped(exc)
    return out
