"""Reading the journal without changing it: for `journal status`, `events`, `doctor` and completion.

Everything here opens the file read-only with plain `sqlite3` (no sqlite-utils, no migration, no
sweep of dead owners), so it is cheap enough for a TAB press and works on a journal this emceepee
would refuse to write: one written by a newer version, or on a full disk. A journal that does not
exist reads as empty.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from emceepee_cli.errors import JournalError
from emceepee_cli.store.faults import journal_error, torn
from emceepee_cli.store.pages import TaskFilter, TaskPage, read_page

if TYPE_CHECKING:
    from emceepee_cli.store.records import EventRow, InstanceRow

BUSY_TIMEOUT_S = 2.0
MIGRATIONS_TABLE = "_sqlite_migrations"
# The migrations this emceepee knows (store/migrations.py; a test keeps the two the same): a journal
# with any other was written by a newer emceepee, and is read only through the Journal, which says so.
KNOWN_MIGRATIONS = (
    "m001_initial",
    "m002_pending_and_rounds",
    "m003_process_start",
    "m004_spawned",
    "m005_listing_indexes",
    "m006_chains_and_resume_tokens",
    "m007_host_rounds",
)
COUNTED = {"tasks": "status", "pending": "status", "events": "type", "instances": None, "spawned": None}


@contextlib.contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to the journal, or None when there is no journal file yet; SQLite's
    failures come out as a `JournalError` naming the file."""
    if not path.exists():
        yield None
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from exc
    conn.row_factory = sqlite3.Row
    try:
        if conn.execute("PRAGMA page_count").fetchone()[0]:  # a file that is no database fails here
            problem = torn(path, int(conn.execute("PRAGMA page_size").fetchone()[0]))
            if problem is not None:  # read as sound by SQLite, zeros where the file was cut
                raise problem
        yield conn
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from exc
    finally:
        conn.close()


def _unreadable(path: Path, exc: sqlite3.Error) -> JournalError:
    return journal_error(exc, path)  # damaged, locked, read-only…: each with its fix


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with reading(path) as conn:
        if conn is None:
            return []
        try:
            return [dict(row) for row in conn.execute(sql, params)]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a journal not migrated yet: nothing in it
                return []
            raise


def task_choices(path: Path, limit: int = 200) -> list[tuple[str, str]]:
    """(task id, what it is) for completion, newest first."""
    found = rows(
        path, "SELECT task_id, status, server, tool FROM tasks ORDER BY task_id DESC LIMIT ?", (limit,)
    )
    return [(r["task_id"], f"{r['status']} {r['server']}.{r['tool']}") for r in found]


def question_choices(path: Path) -> list[tuple[str, str]]:
    """(question id, what it is) for the questions still waiting for an answer."""
    found = rows(
        path, "SELECT request_id, kind, server FROM pending WHERE status = 'pending' ORDER BY request_id"
    )
    return [(r["request_id"], f"{r['kind']} from {r['server']}") for r in found]


def events(
    path: Path,
    after: str | None = None,
    limit: int = 50,
    server: str | None = None,
    types: Sequence[str] = (),
    since: str | None = None,
) -> list[EventRow]:
    """Events after the id `after` (all when None), of `server` and of one of `types` when given,
    made at or after the time `since` (as the journal writes time); oldest first, at most the
    `limit` latest."""
    where, params = ["1 = 1"], []
    if after:
        where.append("event_id > ?")
        params.append(after)
    if server:
        where.append("server = ?")
        params.append(server)
    if types:
        where.append(f"type IN ({', '.join('?' for _ in types)})")
        params.extend(types)
    if since:
        where.append("created_at >= ?")
        params.append(since)
    sql = (
        f"SELECT * FROM (SELECT event_id, instance_id, type, server, data, created_at FROM events "
        f"WHERE {' AND '.join(where)} ORDER BY event_id DESC LIMIT ?) ORDER BY event_id"
    )
    return cast("list[EventRow]", rows(path, sql, (*params, limit)))


def status(path: Path) -> dict[str, Any]:
    """What `journal status` shows: the files and their sizes, the schema, counts, the oldest row."""
    files = {
        str(p): p.stat().st_size for p in (path, _sibling(path, "-wal"), _sibling(path, "-shm")) if p.exists()
    }
    out: dict[str, Any] = {
        "path": str(path),
        "exists": path.exists(),
        "files": files,
        "bytes": sum(files.values()),
    }
    if not path.exists():
        return out
    out["mode"] = oct(stat.S_IMODE(path.stat().st_mode))
    out["private"] = os.name == "nt" or stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
    with reading(path) as conn:
        assert conn is not None
        out["health"] = conn.execute("PRAGMA quick_check").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out["migrations"] = (
            [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY applied_at, name")]
            if MIGRATIONS_TABLE in tables
            else []
        )
        out["counts"] = {
            name: _count(conn, name, column) for name, column in COUNTED.items() if name in tables
        }
        oldest = [
            conn.execute(f"SELECT MIN(created_at) FROM {name}").fetchone()[0]
            for name in ("tasks", "pending", "events")
            if name in tables
        ]
        out["oldest"] = min((o for o in oldest if o), default=None)
    return out


def instances(path: Path) -> list[InstanceRow]:
    """The `serve` processes the journal knows of that have not recorded their stop."""
    return cast(
        "list[InstanceRow]",
        rows(path, "SELECT * FROM instances WHERE stopped_at IS NULL ORDER BY started_at"),
    )


def task_page(path: Path, where: TaskFilter, cursor: str | None, limit: int) -> TaskPage:
    """A page of the tasks `emceepee tasks list` shows, newest first, as the journal pages them."""
    return read_page(lambda sql, params: rows(path, sql, tuple(params)), where, cursor, limit)


def current(path: Path) -> bool:
    """The journal exists and has every migration this emceepee knows, and none other."""
    applied = [r["name"] for r in rows(path, f"SELECT name FROM {MIGRATIONS_TABLE}")]
    return sorted(applied) == sorted(KNOWN_MIGRATIONS)


def left_by_dead(path: Path) -> bool:
    """Whether a `serve` that is gone left a call working, a question pending or a process
    running: then the journal must be opened for writing to settle it before it is shown."""
    from emceepee_cli.store.liveness import instance_alive

    owners = rows(
        path,
        "SELECT * FROM instances WHERE instance_id IN ("
        "SELECT instance_id FROM tasks WHERE status = 'working'"
        " UNION SELECT instance_id FROM pending WHERE status = 'pending'"
        " UNION SELECT instance_id FROM spawned)",
    )
    return not all(instance_alive(cast("InstanceRow", owner)) for owner in owners)


def _count(conn: sqlite3.Connection, table: str, column: str | None) -> dict[str, int] | int:
    if column is None:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    by = conn.execute(f"SELECT {column}, COUNT(*) FROM {table} GROUP BY {column} ORDER BY {column}")
    return {str(value): int(n) for value, n in by}


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
