"""The journal: one SQLite file (WAL, 0600) shared by every `serve` process and the CLI.

It is synchronous on purpose: the CLI uses it directly, and `serve` reaches it through one
worker thread (`store/aio.py`), so the event loop never blocks on SQLite. Writers that race
(two hosts, or the CLI and a host) are settled by SQLite itself: every state change is an
`UPDATE … WHERE status = 'working'`, so the first writer wins and the others see 0 rows. The
one exception is the owner itself: a live `serve` still finishes (and answers) its own rows that
another process settled as orphans by mistake (see store/orphans.py).

A `Journal` is made of parts, one per table or concern, each reached by its name:
`journal.tasks.finish(…)`, `journal.pending.settle(…)`, `journal.events.claim(…)`. They share one
connection (store/connection.py); what concerns the whole journal — its file, closing it, keeping
it — is the journal's own.

A `serve` also keeps its journal file: if the file at the path is deleted or replaced while it
runs, `recover` re-creates it and writes back this process's own rows (store/recovery.py).

A `serve` whose journal file cannot be used when it starts (damaged, read-only, locked, newer)
gets one in memory instead (`for_serve`): `fault` says what is wrong with the file, which is left
as it is — never re-created, repaired or written — until a restart finds it fixed.
"""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from emceepee_cli import paths
from emceepee_cli.errors import JournalError
from emceepee_cli.store.connection import Connection
from emceepee_cli.store.db import check_writable, mapped
from emceepee_cli.store.recovery import Recovery
from emceepee_cli.store.retention import Retention
from emceepee_cli.store.tables.events import EventLog
from emceepee_cli.store.tables.instances import Instances
from emceepee_cli.store.tables.pending import Pending
from emceepee_cli.store.tables.results import Results
from emceepee_cli.store.tables.spawned import Spawned
from emceepee_cli.store.tables.steps import Steps
from emceepee_cli.store.tables.tasks import Tasks


class Journal:
    """The journal at one path, and its parts.

    Holds the `connection` (the file, or one in memory standing in for it) and, on it: `tasks`,
    their kept `results` and their `steps`; the `pending` questions; the `events` and cursors; the
    `instances` and what dead ones left; the processes `spawned`; and `retention`. Lifetime: the
    CLI opens one per command; a `serve` one for its whole run, which only its worker thread uses
    (store/aio.py). `close` ends it, and every part with it.
    """

    def __init__(self, path: Path | None = None, *, fault: JournalError | None = None) -> None:
        """The journal at `path`; with a `fault`, one in memory standing in for that file."""
        self.connection = Connection(paths.db_path(path), fault)
        self.tasks = Tasks(self.connection)
        self.results = Results(self.connection)
        self.steps = Steps(self.connection)
        self.pending = Pending(self.connection)
        self.events = EventLog(self.connection)
        self.instances = Instances(self.connection, self.tasks)
        self.spawned = Spawned(self.connection)
        self.retention = Retention(self.connection)
        self._recovery = Recovery(self.connection)

    def __repr__(self) -> str:
        where = self.path if self.fault is None else f"memory (not {self.path})"
        return f"<Journal {where} owner={self.connection.owner}>"

    @classmethod
    def for_serve(cls, path: Path | None = None) -> Journal:
        """The journal `serve` writes to, or — when its file cannot be used — one in memory whose
        `fault` says why. Opening never writes to a file it then refuses."""
        where = paths.db_path(path)
        try:
            check_writable(where)
            return cls(where)
        except JournalError as exc:
            return cls(where, fault=exc)

    @property
    def path(self) -> Path:
        return self.connection.path

    @property
    def fault(self) -> JournalError | None:
        """Why this journal is kept in memory rather than in its file at `path`; None in its file."""
        return self.connection.fault

    @property
    def db(self) -> sqlite_utils.Database:
        """The connection as it is now (`recover` may replace it)."""
        return self.connection.db

    @mapped
    def close(self) -> None:
        self.db.close()

    @mapped
    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap "anything new?" check."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def recover(self) -> str | None:
        """Re-create the journal file if it is no longer the one this `serve` opened (store/recovery.py);
        what happened, for the log, or None when the file is still the same."""
        return self._recovery.recover()
