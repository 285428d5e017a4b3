"""A task's result kept as the bytes the host gets: written once, read back a piece at a time.

A result taken raw by the fast lane (calls/raw_step.py) is already the exact JSON the host is
sent. When its call was promoted to a task, those bytes are journaled as they are: a BLOB in
`tasks.result` (every other result there is TEXT, the result's JSON), written through SQLite's
incremental blob I/O so that neither SQLite nor Python holds a second whole copy. `typeof(result)
= 'blob'` is what marks it; its JSON reads like any other (`calls/call.outcome` takes bytes).

The task's step row then keeps no copy of it (store/tables/steps.py): its result is the task's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Protocol

import sqlite_utils

from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped

PIECE_BYTES = 1024 * 1024  # a kept result is read back this much at a time


class Body(Protocol):
    """A result's bytes, read in pieces (calls/spool.Held is one)."""

    @property
    def size(self) -> int: ...
    def chunks(self) -> Iterator[bytes]: ...


def write_body(db: sqlite_utils.Database, task_id: str, body: Body) -> None:
    """Fill the `zeroblob` the caller put in the task's result with `body` (inside its transaction)."""
    rowid = db.execute("SELECT rowid FROM tasks WHERE task_id = ?", [task_id]).fetchone()[0]
    with db.conn.blobopen("tasks", "result", rowid) as blob:
        for piece in body.chunks():
            blob.write(piece)


class Results(Part):
    """The journal's kept results, read back (`journal.results`; `Tasks.finish` writes them): holds
    only the journal's connection, for its lifetime."""

    @mapped
    def kept_size(self, task_id: str) -> int | None:
        """The size of the task's result when it is kept as the host's bytes (None: it is not)."""
        found = self.db.execute(
            "SELECT length(result) FROM tasks WHERE task_id = ? AND typeof(result) = 'blob'", [task_id]
        ).fetchone()
        return None if found is None else int(found[0])

    @mapped
    def read_kept(self, task_id: str, sink: BinaryIO) -> int:
        """Copy the task's kept result into `sink`, a piece at a time; how many bytes were copied."""
        found = self.db.execute(
            "SELECT rowid FROM tasks WHERE task_id = ? AND typeof(result) = 'blob'", [task_id]
        ).fetchone()
        if found is None:
            return 0
        copied = 0
        with self.db.conn.blobopen("tasks", "result", found[0], readonly=True) as blob:
            while piece := blob.read(PIECE_BYTES):
                sink.write(piece)
                copied += len(piece)
        return copied
