"""Retention: rows that outlived `retention_s` leave the journal in bounded batches, and the file
gives their space back.

`serve` reaches the journal through one worker thread, so a single statement deleting a month of
events would hold every other journal call (a task's end, an answer) until it is done. A purge is
a series of batches instead, each at most PURGE_BATCH rows of one table found through an index,
each its own short transaction and its own trip to the worker, so other work takes turns with it
(the worker's limiter is first come, first served). What goes: finished tasks, events, settled
questions, and instances long stopped that own nothing still open (with their cursors).

Freed pages: a journal opened by this emceepee is switched to incremental auto-vacuum (at once if
it is new; an older one at the next `serve` start, by a VACUUM, if it is small enough for that to
be quick), and `compact` hands freed pages back to the file system a few megabytes at a time. A
journal too large to convert quickly keeps its freed pages on SQLite's free list, which new rows
reuse: it stays at its high-water mark instead of growing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from ulid import ULID

from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped
from emceepee_cli.store.liveness import instance_alive
from emceepee_cli.store.records import ElicitationStatus, InstanceRow, TaskStatus

PURGE_BATCH = 500  # rows per batch: milliseconds of work, even for tasks with all their indexes
COMPACT_PAGES = 256  # pages handed back per step: 1 MiB, some 10-30 ms of moving pages
CONVERT_MAX_BYTES = 32 * 1024 * 1024  # an older journal up to this size is converted at serve's start
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for incremental


class Retention(Part):
    """What leaves the journal, and the space it gives back (`journal.retention`): holds only the
    journal's connection, for its lifetime."""

    @mapped
    def purge_batch(
        self, retention_s: float, limit: int = PURGE_BATCH, *, now: datetime | None = None
    ) -> int:
        """Delete up to `limit` rows older than the retention, from the first table that has some;
        how many (0: nothing is left to purge)."""
        cutoff = (now or datetime.now(UTC)) - timedelta(seconds=retention_s)
        at = cutoff.strftime("%Y-%m-%dT%H:%M:%S.") + f"{cutoff.microsecond // 1000:03d}Z"
        # Event ids are ULIDs made when the event was: the primary key finds the old ones in order.
        first_id = str(ULID.from_bytes(int(cutoff.timestamp() * 1000).to_bytes(6, "big") + bytes(10)))
        if tasks := self._purge_tasks(at, limit):
            return tasks
        for table, where, params in (
            ("events", "event_id < ? AND created_at < ?", [first_id, at]),
            ("pending", "answered_at < ? AND status != ?", [at, ElicitationStatus.PENDING.value]),
        ):
            sql = f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {where} LIMIT ?)"
            deleted = int(self.db.execute(sql, [*params, limit]).rowcount)
            if deleted:
                return deleted
        return self._purge_instances(at, limit)

    def _purge_tasks(self, at: str, limit: int) -> int:
        """Finished tasks past the cutoff, with the steps journaled for them (store/tables/steps.py)."""
        found = self.db.execute(
            "SELECT task_id FROM tasks WHERE finished_at < ? AND status != ? LIMIT ?",
            [at, TaskStatus.WORKING.value, limit],
        ).fetchall()
        ids = [row[0] for row in found]
        if ids:
            marks = ", ".join("?" * len(ids))
            with self.db.conn:  # a task and its steps go together
                self.db.execute(f"DELETE FROM task_steps WHERE task_id IN ({marks})", ids)
                self.db.execute(f"DELETE FROM tasks WHERE task_id IN ({marks})", ids)
        return len(ids)

    def _purge_instances(self, at: str, limit: int) -> int:
        """Instances last heard of before the cutoff that own nothing open and left nothing running."""
        rows = list(
            self.db.query(
                "SELECT * FROM instances i WHERE coalesce(stopped_at, heartbeat_at) < ?"
                " AND NOT EXISTS (SELECT 1 FROM tasks WHERE status = ? AND instance_id = i.instance_id)"
                " AND NOT EXISTS (SELECT 1 FROM pending WHERE status = ? AND instance_id = i.instance_id)"
                " AND NOT EXISTS (SELECT 1 FROM spawned WHERE instance_id = i.instance_id) LIMIT ?",
                [at, TaskStatus.WORKING.value, ElicitationStatus.PENDING.value, limit],
            )
        )
        # One that never recorded its stop may still run (a laptop asleep for days): it stays.
        gone = [r["instance_id"] for r in rows if not instance_alive(cast(InstanceRow, r))]
        for instance_id in gone:
            self.db.execute("DELETE FROM instances WHERE instance_id = ?", [instance_id])
            self.db.execute("DELETE FROM cursors WHERE session_id = ?", [instance_id])
        return len(gone)

    @mapped
    def purge_finished(self, retention_s: float) -> int:
        """Everything past the retention, all at once (for a caller that has nothing else to do)."""
        total = 0
        while deleted := self.purge_batch(retention_s):
            total += deleted
        return total

    @mapped
    def compact(self, pages: int = COMPACT_PAGES) -> int:
        """Hand up to `pages` free pages back to the file system; how many (0: none left, or a journal
        without incremental auto-vacuum, whose free pages wait for new rows)."""
        if self.db.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
            return 0
        free = min(int(self.db.execute("PRAGMA freelist_count").fetchone()[0]), pages)
        if free:
            # executescript steps the pragma to its end; execute would free one page
            self.db.conn.executescript(f"PRAGMA incremental_vacuum({int(free)});")
        return free

    @mapped
    def convert_to_incremental(self, max_bytes: int = CONVERT_MAX_BYTES) -> bool:
        """Switch an older journal to incremental auto-vacuum (one VACUUM) if it is small enough."""
        if self.db.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
            return False
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        if pages * self.db.execute("PRAGMA page_size").fetchone()[0] > max_bytes:
            return False
        self.db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self.db.execute("VACUUM")
        return True
