"""A journal file deleted (or replaced) under a running `serve`: notice it, and re-create it.

SQLite keeps writing to a deleted file through its open descriptor, so nothing fails: the CLI
sees an empty journal and everything is gone when `serve` exits. The watcher (session/watcher.py)
calls `recover` on every tick; it compares the file at the path with the one this process opened
(device and inode), and when they differ it takes this process's own rows — its instance, its
tasks, its questions — from the connection it still holds, lets that go, opens (or creates) the
journal at the path and writes them back. What other processes had written to the deleted file
is gone with it; the live state of this one is kept, and so is every result that comes later.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import suppress
from typing import Any

import sqlite_utils

from emceepee_cli.store.connection import Connection, Part
from emceepee_cli.store.db import close_quietly, connect, file_id
from emceepee_cli.store.tables.instances import this_instance

log = logging.getLogger(__name__)

OWN_TABLES = ("instances", "tasks", "pending")


class Recovery(Part):
    """Keeps the journal's file under a running `serve` (`Journal.recover`).

    Holds the journal's connection, whose `db` and `file_id` it replaces when it re-creates the
    file, and — from a failed attempt to the next — the rows it took from the deleted file and has
    not written back yet. Lifetime: the journal's.
    """

    def __init__(self, connection: Connection) -> None:
        super().__init__(connection)
        self._kept: dict[str, list[dict[str, Any]]] | None = None

    def replaced(self) -> bool:
        if self.connection.fault is not None:  # kept in memory: the file at the path is not this journal's
            return False
        return file_id(self.path) != self.connection.file_id

    def recover(self) -> str | None:
        """If the journal file is no longer the one this `serve` opened, re-create it with this
        process's rows; what happened (for the log), or None when the file is still the same."""
        if self.connection.owner is None or not self.replaced():
            return None
        if self._kept is None:
            self._kept = self._own_rows()
            close_quietly(self.db, keep_sidecars=True)
        if file_id(self.path) is None:
            for sidecar in ("-wal", "-shm"):  # the deleted journal's: a new one must not inherit them
                with suppress(OSError):
                    os.unlink(f"{self.path}{sidecar}")
        kept = self._kept
        # written in the same transaction that creates the schema: nobody sees the journal without them;
        # failing, the next tick tries again
        self.connection.db = connect(self.path, seed=lambda db: _write(db, kept))
        self.connection.file_id = file_id(self.path)
        self._kept = None
        return (
            f"The journal {self.path} was deleted or replaced while emceepee was running; it was "
            f"re-created with this process's {len(kept['tasks'])} task(s) and {len(kept['pending'])} "
            f"question(s). What other emceepee processes had recorded in it is gone."
        )

    def _own_rows(self) -> dict[str, list[dict[str, Any]]]:
        owner = self.connection.owner
        try:
            return {
                table: list(self.db.table(table).rows_where("instance_id = ?", [owner]))
                for table in OWN_TABLES
            }
        except sqlite3.Error as exc:  # the old file is unreadable too: keep at least who we are
            log.error("journal: could not read this process's rows from the deleted journal: %s", exc)
            return {"instances": [dict(this_instance(owner or ""))], "tasks": [], "pending": []}


def _write(db: sqlite_utils.Database, kept: dict[str, list[dict[str, Any]]]) -> None:
    for table in OWN_TABLES:
        if kept[table]:
            db.table(table).insert_all(kept[table], replace=True)
