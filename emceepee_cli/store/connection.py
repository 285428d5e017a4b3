"""The journal's one connection, and what every part of the journal stands on.

A `Journal` (store/journal.py) is made of parts, one per table or concern (tasks, pending
questions, events, instances, …). They do not each open the file: they share one `Connection`,
so that `serve`'s one worker thread (store/aio.py) is the only user of one SQLite connection, and
so that when the file is re-created under a running `serve` (store/recovery.py) every part writes
to the new one from its next call on. A part reads `connection.db` on every call for that reason,
and never keeps the database it got.
"""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from emceepee_cli.errors import JournalError
from emceepee_cli.store.db import connect, file_id, in_memory


class Connection:
    """The journal's SQLite connection and what it is to this process.

    Holds: `path`, the journal file; `db`, the connection (to that file, or — with a `fault`, which
    says why the file cannot be used — to one in memory standing in for it); `file_id`, which file
    was opened (device and inode; None in memory); `owner`, the instance this process registered
    (a `serve`'s, None for the CLI), whose rows it keeps and may take back.

    Lifetime: made when the journal opens and held by it and all its parts until it closes;
    `db` and `file_id` are swapped by recovery when the file at `path` is re-created.
    """

    def __init__(self, path: Path, fault: JournalError | None = None) -> None:
        self.path = path
        self.fault = fault
        self.db = connect(path) if fault is None else in_memory()
        self.file_id = file_id(path) if fault is None else None
        self.owner: str | None = None


class Part:
    """One part of the journal: its methods read and write some tables through the journal's
    `Connection`, which it shares with the other parts and does not own (the journal closes it).

    Holds: `connection`. Lifetime: the journal's; made with it, never on its own.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @property
    def db(self) -> sqlite_utils.Database:
        """The connection as it is now: recovery may have replaced the one of the last call."""
        return self.connection.db

    @property
    def path(self) -> Path:
        return self.connection.path
