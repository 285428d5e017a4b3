"""Opening the journal file (or one in memory, for a `serve` that cannot use the file); SQLite's
failures become the errors of store/faults.py, which say what to do.

Opening is safe under concurrency: two hosts start `serve` at once, and a CLI command runs
beside them, all on a journal that does not exist yet. SQLite settles most of it with its busy
timeout, but not all: switching to WAL and a migration racing another can fail at once with
"locked" (or find a table another process has just created). So an open that meets a locked or
busy database starts again, with a bounded backoff, and a migration runs under BEGIN IMMEDIATE
and checks again, once it holds the write lock, what is still to be done.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import sqlite_utils

from emceepee_cli import paths
from emceepee_cli.errors import JournalError
from emceepee_cli.store.faults import is_busy, journal_error, read_only, torn, writable_problem
from emceepee_cli.store.migrations import check_not_newer, migrations

BUSY_TIMEOUT_MS = 5000
OPEN_RETRY_S = 15.0  # a journal still locked after this long is reported as locked
OPEN_BACKOFF_S = (0.01, 0.5)  # first and longest pause between attempts

P = ParamSpec("P")
T = TypeVar("T")


class HasPath(Protocol):
    @property
    def path(self) -> Path: ...


S = TypeVar("S", bound=HasPath)


def mapped(fn: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """A journal method whose SQLite failures become JournalErrors, at this one edge."""

    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise journal_error(exc, self.path) from exc

    return functools.update_wrapper(wrapper, fn)


def connect(path: Path, seed: Callable[[sqlite_utils.Database], None] | None = None) -> sqlite_utils.Database:
    """The journal at `path`, created (0600) and migrated if need be; retried while another opens it.

    `seed` writes rows in the migration's transaction, so that nobody sees the new journal without them.
    """
    deadline = time.monotonic() + OPEN_RETRY_S
    pause = OPEN_BACKOFF_S[0]
    while True:
        try:
            paths.ensure_private_dir(path.parent)
            return _open(path, seed)
        except sqlite3.Error as exc:
            if not is_busy(exc) or time.monotonic() + pause > deadline:
                raise journal_error(exc, path) from exc
        except PermissionError as exc:
            raise read_only(path, str(exc)) from exc
        except OSError as exc:
            raise JournalError(
                f"The journal {path} could not be created: {exc}",
                hint="Check that its folder is writable, or use --db / EMCEEPEE_DB.",
            ) from exc
        time.sleep(pause)
        pause = min(pause * 2, OPEN_BACKOFF_S[1])


def _open(path: Path, seed: Callable[[sqlite_utils.Database], None] | None) -> sqlite_utils.Database:
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
    )
    try:
        db = sqlite_utils.Database(conn)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        pages = db.execute("PRAGMA page_count").fetchone()[0]  # reads: a file that is no database fails here
        check_whole_pages(db, path)  # before the first write: SQLite would take it as sound
        if pages == 0:  # a new file: before its first table
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # see store/retention.py
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        check_not_newer(db, str(path))
        if migrations.pending(db) or seed is not None:
            with immediate(db):  # one process migrates; the others wait, then find nothing to do
                check_not_newer(db, str(path))
                migrations.apply(db)
                if seed is not None:
                    seed(db)
    except BaseException:
        conn.close()
        raise
    return db


def check_whole_pages(db: sqlite_utils.Database, path: Path) -> None:
    """Refuse a journal file cut short inside a page (store/faults.py)."""
    problem = torn(path, int(db.execute("PRAGMA page_size").fetchone()[0]))
    if problem is not None:
        raise problem


def in_memory() -> sqlite_utils.Database:
    """A journal that lives in this process only (for a `serve` whose file cannot be used): the same
    schema, on one connection the journal's worker thread uses."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    db = sqlite_utils.Database(conn)
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # as a new file: nothing to convert at start
    migrations.apply(db)
    return db


def check_writable(path: Path) -> None:
    """Refuse a journal this user cannot write (store/faults.py)."""
    problem = writable_problem(path)
    if problem is not None:
        raise problem


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A write transaction that takes the write lock first (waiting for it with the busy timeout),
    so that what it read cannot have changed before it writes."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.conn.in_transaction:
            with suppress(sqlite3.Error):  # the first failure is the one to report
                db.execute("ROLLBACK")
        raise


def file_id(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` (device and inode), or None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def close_quietly(db: sqlite_utils.Database, *, keep_sidecars: bool = False) -> str | None:
    """Close a connection; what went wrong, if anything (a close must never raise at shutdown).

    `keep_sidecars`: this connection's file was deleted; closing normally would checkpoint and then
    delete `<path>-wal` and `-shm` by name, which may by now belong to a re-created journal. Python
    3.12+ can tell SQLite not to; on 3.11 the caller closes before re-creating, to keep that window small.
    """
    conn: Any = db.conn
    try:
        if keep_sidecars and hasattr(conn, "setconfig"):
            conn.setconfig(sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, True)  # type: ignore[attr-defined]  # 3.12+, hasattr-guarded
        conn.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None
