"""The journal: one SQLite file (WAL, 0600) shared by every `serve` process and the CLI.

It is synchronous on purpose: the CLI uses it directly, and `serve` reaches it through one
worker thread (`AsyncJournal`), so the event loop never blocks on SQLite. Writers that race
(two hosts, or the CLI and a host) are settled by SQLite itself: every state change is an
`UPDATE … WHERE status = 'working'`, so the first writer wins and the others see 0 rows. The
one exception is the owner itself: a live `serve` still finishes (and answers) its own rows that
another process settled as orphans by mistake (see store/instances.py).

A `serve` also keeps its journal file: if the file at the path is deleted or replaced while it
runs, `recover` re-creates it and writes back this process's own rows (store/recovery.py).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from emceepee_cli import paths
from emceepee_cli.clock import now_iso
from emceepee_cli.errors import JournalError
from emceepee_cli.redact import redact, redact_data
from emceepee_cli.store.db import close_quietly, connect, file_id, mapped
from emceepee_cli.store.instances import HEARTBEAT_S, ORPHANED, STALE_AFTER_S, Instances, owns_by_mistake
from emceepee_cli.store.records import ElicitationStatus, TaskStatus
from emceepee_cli.store.recovery import Recovery

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "AsyncJournal", "Journal"]

T = TypeVar("T")
log = logging.getLogger(__name__)
MISTAKEN_ORPHAN = "(status = ? AND instance_id = ? AND error LIKE ?)"  # see owns_by_mistake


class Journal(Instances, Recovery):
    def __init__(self, path: Path | None = None) -> None:
        self.path = paths.db_path(path)
        self.db = connect(self.path)
        self.file_id = file_id(self.path)
        self.owner: str | None = None

    def __repr__(self) -> str:
        return f"<Journal {self.path} owner={self.owner}>"

    @mapped
    def close(self) -> None:
        self.db.close()

    @mapped
    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap "anything new?" check."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    # ---- tasks -------------------------------------------------------------------------

    @mapped
    def insert_task(self, row: dict[str, Any]) -> None:
        self.db["tasks"].insert({**row, "args": json.dumps(row.get("args"))})

    @mapped
    def finish_task(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        message: str | None = None,
    ) -> bool:
        """Move a working task to a final state; False if someone else finished it first."""
        at = now_iso()
        cursor = self.db.execute(
            "UPDATE tasks SET status = ?, result = ?, error = ?, status_message = coalesce(?, status_message), "
            f"finished_at = ?, last_updated_at = ? WHERE task_id = ? AND (status = ? OR {MISTAKEN_ORPHAN})",
            [
                status.value,
                json.dumps(result) if result is not None else None,
                redact(error) if error else error,
                message,
                at,
                at,
                task_id,
                TaskStatus.WORKING.value,
                TaskStatus.INTERRUPTED.value,
                self.owner,
                ORPHANED + "%",
            ],
        )
        return cursor.rowcount == 1

    @mapped
    def update_progress(self, task_id: str, progress: dict[str, Any], message: str | None) -> None:
        self.db.execute(
            "UPDATE tasks SET progress = ?, status_message = coalesce(?, status_message), last_updated_at = ? "
            "WHERE task_id = ? AND status = ?",
            [json.dumps(progress), message, now_iso(), task_id, TaskStatus.WORKING.value],
        )

    @mapped
    def request_cancel(self, task_id: str) -> bool:
        cursor = self.db.execute(
            "UPDATE tasks SET cancel_requested = 1, last_updated_at = ? WHERE task_id = ? AND status = ?",
            [now_iso(), task_id, TaskStatus.WORKING.value],
        )
        return cursor.rowcount == 1

    @mapped
    def cancel_requests(self, instance_id: str) -> list[str]:
        sql = "SELECT task_id FROM tasks WHERE instance_id = ? AND status = ? AND cancel_requested = 1"
        return [r["task_id"] for r in self.db.query(sql, [instance_id, TaskStatus.WORKING.value])]

    @mapped
    def task(self, task_id: str) -> dict[str, Any] | None:
        rows = list(self.db["tasks"].rows_where("task_id = ?", [task_id]))
        if rows and owns_by_mistake(self.owner, rows[0], TaskStatus.INTERRUPTED):
            # still ours and still running, until the watcher's `reclaim` writes it back
            return {**rows[0], "status": TaskStatus.WORKING.value, "error": None, "finished_at": None}
        return rows[0] if rows else None

    @mapped
    def tasks(
        self,
        *,
        server: str | None = None,
        status: str | None = None,
        include_finished: bool = False,
        instance_id: str | None = None,
    ) -> list[dict[str, Any]]:
        where, params = [], []
        for column, value in (("server", server), ("status", status), ("instance_id", instance_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if status is None and not include_finished:
            where.append("status = ?")
            params.append(TaskStatus.WORKING.value)
        return list(self.db["tasks"].rows_where(" AND ".join(where) or None, params, order_by="task_id"))

    @mapped
    def task_ids(self) -> list[str]:
        return [r["task_id"] for r in self.db.query("SELECT task_id FROM tasks")]

    @mapped
    def purge_finished(self, retention_s: float) -> int:
        cursor = self.db.execute(
            "DELETE FROM tasks WHERE status != ? AND finished_at < ?",
            [TaskStatus.WORKING.value, now_iso(-retention_s)],
        )
        self.db.execute("DELETE FROM events WHERE created_at < ?", [now_iso(-retention_s)])
        return cursor.rowcount

    @mapped
    def set_round(self, task_id: str, request_state: str | None, round_: int) -> None:
        self.db.execute(
            "UPDATE tasks SET request_state = ?, round = ?, last_updated_at = ? WHERE task_id = ?",
            [request_state, round_, now_iso(), task_id],
        )

    # ---- pending questions ---------------------------------------------------------------

    @mapped
    def insert_pending(self, row: dict[str, Any]) -> None:
        self.db["pending"].insert({**row, "params": json.dumps(row["params"])})

    @mapped
    def settle_pending(
        self,
        request_id: str,
        status: str,
        *,
        answer: dict[str, Any] | None = None,
        by: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Answer (or end) a pending question; False if it was no longer pending — first writer wins."""
        cursor = self.db.execute(
            "UPDATE pending SET status = ?, answer = ?, answered_by = ?, error = ?, answered_at = ? "
            f"WHERE request_id = ? AND (status = ? OR {MISTAKEN_ORPHAN})",
            [
                status,
                json.dumps(answer) if answer is not None else None,
                by,
                redact(error) if error else error,
                now_iso(),
                request_id,
                ElicitationStatus.PENDING.value,
                ElicitationStatus.REJECTED.value,
                self.owner,
                ORPHANED + "%",
            ],
        )
        return cursor.rowcount == 1

    @mapped
    def set_forwarded(self, request_id: str, forwarded: bool) -> None:
        self.db.execute("UPDATE pending SET forwarded = ? WHERE request_id = ?", [int(forwarded), request_id])

    @mapped
    def pending_row(self, request_id: str) -> dict[str, Any] | None:
        rows = list(self.db["pending"].rows_where("request_id = ?", [request_id]))
        if rows and owns_by_mistake(self.owner, rows[0], ElicitationStatus.REJECTED):
            # still ours and still open, until the watcher's `reclaim` writes it back
            return {**rows[0], "status": ElicitationStatus.PENDING.value, "error": None, "answered_at": None}
        return rows[0] if rows else None

    @mapped
    def pending_rows(
        self,
        *,
        status: str | None = "pending",
        instance_id: str | None = None,
        server: str | None = None,
        kind: str | None = None,
        task_id: str | None = None,
        since: str | None = None,
    ) -> list[dict[str, Any]]:
        where, params = [], []
        for column, value in (
            ("status", status),
            ("instance_id", instance_id),
            ("server", server),
            ("kind", kind),
            ("task_id", task_id),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("answered_at >= ?")
            params.append(since)
        return list(self.db["pending"].rows_where(" AND ".join(where) or None, params, order_by="request_id"))

    @mapped
    def pending_ids(self) -> list[str]:
        return [r["request_id"] for r in self.db.query("SELECT request_id FROM pending")]

    # ---- events ------------------------------------------------------------------------

    @mapped
    def add_event(self, event: dict[str, Any]) -> None:
        self.db["events"].insert({**event, "data": json.dumps(redact_data(event.get("data")))})

    @mapped
    def set_cursor(self, session_id: str, event_id: str) -> None:
        self.db["cursors"].upsert(
            {"session_id": session_id, "last_event_id": event_id, "updated_at": now_iso()}, pk="session_id"
        )

    @mapped
    def update_event_data(self, event_id: str, data: dict[str, Any]) -> None:
        self.db.execute("UPDATE events SET data = ? WHERE event_id = ?", [json.dumps(data), event_id])

    # ---- processes serve spawned (see core/leftovers.py) --------------------------------

    @mapped
    def add_spawned(self, instance_id: str, server: str, pid: int, start_time: int) -> None:
        row = {"instance_id": instance_id, "server": server, "pid": pid, "start_time": start_time}
        self.db["spawned"].insert({**row, "spawned_at": now_iso()}, replace=True)

    @mapped
    def forget_spawned(self, instance_id: str, pid: int) -> None:
        self.db.execute("DELETE FROM spawned WHERE instance_id = ? AND pid = ?", [instance_id, pid])

    @mapped
    def spawned_by_dead(self) -> list[dict[str, Any]]:
        """What instances that are no longer alive spawned on this machine (and did not see end)."""
        rows = self.db.query(
            "SELECT i.*, s.server AS spawned_server, s.pid AS spawned_pid, s.start_time AS spawned_start"
            " FROM spawned s JOIN instances i USING (instance_id)"
        )
        dead = []
        for row in rows:  # the instance's own columns, as instance_alive reads them
            if row["machine"] == socket.gethostname() and not self.instance_alive(row):
                dead.append(
                    {
                        "instance_id": row["instance_id"],
                        "server": row["spawned_server"],
                        "pid": row["spawned_pid"],
                        "start_time": row["spawned_start"],
                    }
                )
        return dead


class AsyncJournal:
    """The journal for the event loop: every call runs on one worker thread, in order."""

    SHUTDOWN_S = 8.0  # a write waits up to BUSY_TIMEOUT_MS for a lock; this covers it

    def __init__(self, journal: Journal) -> None:
        self.sync = journal
        self._limiter = anyio.CapacityLimiter(1)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter)

    async def shutdown(self, instance_id: str, bound_s: float = SHUTDOWN_S) -> None:
        """Record that this instance stopped, and close: bounded, and never raising. At shutdown a
        journal that cannot be written (a full disk, a lost file) is an error in the log, not a crash."""

        def stop() -> None:
            try:
                self.sync.stop_instance(instance_id)
            except JournalError as exc:
                log.error("journal: could not record that this emceepee stopped: %s", exc.message)
            problem = close_quietly(self.sync.db)
            if problem:
                log.error("journal: could not close %s cleanly: %s", self.sync.path, problem)

        with anyio.CancelScope(shield=True), anyio.move_on_after(bound_s) as waited:
            await anyio.to_thread.run_sync(stop, limiter=self._limiter, abandon_on_cancel=True)
        if waited.cancelled_caught:
            log.error(
                "journal: %s still busy after %.0f s at shutdown; stopping without it",
                self.sync.path,
                bound_s,
            )

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.sync, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.run(method, *args, **kwargs)

        return call
