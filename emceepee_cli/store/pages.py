"""Listing tasks a page at a time, newest first, with an opaque cursor to the next page.

A journal with months of history holds a hundred thousand tasks: listing them whole is slow to
read and far too long for a model to take in. A page is the newest `limit` tasks a filter
matches, older than the cursor's position; since task ids are monotonic ULIDs, tasks created
while someone pages through are newer than every position and never shift the pages after it.
Each listing query is served by an index in task-id order (migration m005), so a page costs the
same however long the history is; what is left is counted up to MORE_COUNTED (past that, counting
would walk the whole history, and "at least 1000 more" says enough).

The cursor is the last id shown and the filter it was made for, with a checksum: it is a position,
not a credential, but one that was cut, edited or made up, or that is passed with other filters,
is refused with an error saying so rather than silently listing something else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from emceepee_cli.errors import UsageError
from emceepee_cli.store.records import TaskRow, TaskStatus

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
MORE_COUNTED = 1000  # counting what is left walks an index: beyond this, "at least"
OPEN_INDEX = "idx_tasks_open"  # created by migration m005 on exactly OPEN
OPEN = f"status IN ('{TaskStatus.WORKING.value}', '{TaskStatus.INTERRUPTED.value}')"
_CHECK = b"emceepee task cursor v1"  # a new cursor format changes this, so old cursors are refused
_CHECK_BYTES = 8


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks a listing shows: by default those still working and those a stopped emceepee
    interrupted (what was lost is shown until someone looks at it, not only what runs)."""

    server: str | None = None
    status: str | None = None
    include_finished: bool = False

    def clauses(self) -> tuple[list[str], list[Any]]:
        where, params = [], []
        if self.server is not None:
            where.append("server = ?")
            params.append(self.server)
        if self.status is not None:
            where.append("status = ?")
            params.append(self.status)
        elif not self.include_finished:
            where.append(OPEN)  # literal, as in its partial index (m005), so SQLite can use that index
        return where, params

    def key(self) -> list[Any]:
        return [self.server, self.status, self.include_finished]


class TaskPage(TypedDict):
    tasks: list[TaskRow]
    more: NotRequired[int]  # how many tasks the filter matches after this page, when there are any
    more_at_least: NotRequired[bool]  # True: there are more than `more` (counting stops at MORE_COUNTED)
    next_cursor: NotRequired[str]  # where the next page starts, when there are more


# A page shows each task's state, never its result, which may be many MB (store/tables/results.py):
# only whether that result is the tool's own error (`isError`, store/records.py's `reported_error`).
TOOL_ERROR = (
    "CASE WHEN status = 'completed' AND json_valid(CAST(result AS TEXT)) "
    "AND json_extract(CAST(result AS TEXT), '$.isError') = 1 THEN '{\"isError\":true}' END AS result"
)
LISTED = ", ".join(TOOL_ERROR if name == "result" else f"[{name}]" for name in TaskRow.__annotations__)

Query = Callable[[str, list[Any]], list[dict[str, Any]]]  # SQL and parameters to rows, as dicts


def read_page(query: Query, where: TaskFilter, cursor: str | None, limit: int = PAGE_SIZE) -> TaskPage:
    """The newest `limit` tasks `where` matches that come after `cursor` (the first page without).

    `query` runs SQL on whichever connection the caller has: the journal's, or the CLI's cheap
    read-only one (store/inspect.py), so both page alike.
    """
    after = decode(cursor, where) if cursor is not None else None
    rows = [cast(TaskRow, r) for r in query(*_select(LISTED, where, after, limit))]
    page = TaskPage(tasks=rows)
    if len(rows) == limit:
        last = rows[-1]["task_id"]
        sql, params = _select("1", where, last, MORE_COUNTED + 1)
        more = int(query(f"SELECT count(*) AS n FROM ({sql})", params)[0]["n"])
        if more:
            page["more"], page["next_cursor"] = min(more, MORE_COUNTED), encode(last, where)
        if more > MORE_COUNTED:
            page["more_at_least"] = True
    return page


def _select(columns: str, where: TaskFilter, after: str | None, limit: int) -> tuple[str, list[Any]]:
    """The query for up to `limit` tasks `where` matches, older than `after`, newest first."""
    clauses, params = where.clauses()
    if after is not None:
        clauses.append("task_id < ?")
        params.append(after)
    # Without statistics SQLite would read the open tasks through the status index and then sort
    # them all; the partial index already holds them in task-id order.
    table = f"tasks INDEXED BY {OPEN_INDEX}" if OPEN in clauses else "tasks"
    sql = f"SELECT {columns} FROM {table}" + (" WHERE " + " AND ".join(clauses) if clauses else "")
    return sql + " ORDER BY task_id DESC LIMIT ?", [*params, limit]


def encode(last_id: str, where: TaskFilter) -> str:
    body = json.dumps([last_id, *where.key()], separators=(",", ":")).encode()
    return _b64(body) + "." + _b64(_digest(body))


def decode(cursor: str, where: TaskFilter) -> str:
    """The task id a cursor starts after; a clear error if it is not one this listing gave."""
    found = _read(cursor)
    if found is None:
        shown = cursor if len(cursor) <= 40 else cursor[:37] + "…"
        raise UsageError(
            f"The cursor '{shown}' is not one a task listing gave (it is cut, changed or made up).",
            hint="Pass the cursor exactly as the previous page gave it, or leave it out to start again"
            " from the newest task.",
        )
    last_id, key = found
    if key != where.key():
        server, status, finished = key if len(key) == 3 else (None, None, None)
        raise UsageError(
            "The cursor belongs to a listing with other filters"
            f" (server={server!r}, status={status!r}, include_completed={finished!r}).",
            hint="Repeat that listing's filters with its cursor, or leave the cursor out to start again.",
        )
    return last_id


def _read(cursor: str) -> tuple[str, list[Any]] | None:
    """A cursor's position and filter, or None if its checksum does not hold."""
    try:
        body_text, check = cursor.strip().split(".")
        body = _unb64(body_text)
        if _unb64(check) != _digest(body):
            return None
        last_id, *key = json.loads(body)
    except (ValueError, binascii.Error, UnicodeDecodeError, TypeError):
        return None
    return (last_id, key) if isinstance(last_id, str) else None


def clamp_limit(limit: int | None) -> int:
    return PAGE_SIZE if limit is None else max(1, min(int(limit), MAX_PAGE_SIZE))


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(_CHECK + body).digest()[:_CHECK_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
