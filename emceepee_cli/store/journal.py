"""The journal: one SQLite file (WAL, 0600) shared by every `serve` process and the CLI.

It is synchronous on purpose: the CLI uses it directly, and `serve` reaches it through one
worker thread (`AsyncJournal`), so the event loop never blocks on SQLite. Writers that race
(two hosts, or the CLI and a host) are settled by SQLite itself: every state change is an
`UPDATE … WHERE status = 'working'`, so the first writer wins and the others see 0 rows.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio
import anyio.to_thread
import sqlite_utils

from emceepee_cli import paths
from emceepee_cli.errors import JournalError
from emceepee_cli.store.migrations import check_not_newer, migrations
from emceepee_cli.store.records import ElicitationStatus, TaskStatus

BUSY_TIMEOUT_MS = 5000
HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0  # an instance silent this long is dead even if its pid was reused

P = ParamSpec("P")
T = TypeVar("T")


def now_iso(offset_s: float = 0.0) -> str:
    t = time.time() + offset_s
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def _mapped(fn: Callable[P, T]) -> Callable[P, T]:
    """SQLite's failures become a JournalError that says what to do, at this one edge."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise JournalError(
                    f"The journal is locked by another process ({exc}).",
                    hint="Try again in a moment; if it persists, stop other emceepee processes.",
                ) from exc
            raise JournalError(
                f"The journal could not be used: {exc}", hint="Check the file and its folder."
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise JournalError(
                f"The journal is not a usable SQLite file: {exc}",
                hint="Move it aside (emceepee will start a new one) or use --db / EMCEEPEE_DB.",
            ) from exc

    return wrapper


class Journal:
    @_mapped
    def __init__(self, path: Path | None = None) -> None:
        self.path = paths.db_path(path)
        paths.ensure_private_dir(self.path.parent)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db = sqlite_utils.Database(conn)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        check_not_newer(self.db, str(self.path))
        migrations.apply(self.db)

    def __repr__(self) -> str:
        return f"<Journal {self.path}>"

    def close(self) -> None:
        self.db.close()

    @_mapped
    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap "anything new?" check."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    # ---- instances ---------------------------------------------------------------------

    @_mapped
    def register_instance(self, instance_id: str) -> None:
        at = now_iso()
        self.db["instances"].insert(
            {
                "instance_id": instance_id,
                "pid": os.getpid(),
                "machine": socket.gethostname(),
                "started_at": at,
                "heartbeat_at": at,
            }
        )

    @_mapped
    def heartbeat(self, instance_id: str) -> None:
        self.db.execute(
            "UPDATE instances SET heartbeat_at = ? WHERE instance_id = ?", [now_iso(), instance_id]
        )

    @_mapped
    def set_host(self, instance_id: str, name: str | None, version: str | None) -> None:
        self.db.execute(
            "UPDATE instances SET host_name = ?, host_version = ? WHERE instance_id = ?",
            [name, version, instance_id],
        )

    @_mapped
    def stop_instance(self, instance_id: str) -> None:
        self.db.execute("UPDATE instances SET stopped_at = ? WHERE instance_id = ?", [now_iso(), instance_id])

    def instance_alive(self, row: dict[str, Any]) -> bool:
        if row.get("stopped_at"):
            return False
        if row["heartbeat_at"] < now_iso(-STALE_AFTER_S):
            return False
        if row["machine"] == socket.gethostname():
            try:
                os.kill(row["pid"], 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
        return True

    @_mapped
    def instance(self, instance_id: str) -> dict[str, Any] | None:
        rows = list(self.db["instances"].rows_where("instance_id = ?", [instance_id]))
        return rows[0] if rows else None

    def dead_instances(self) -> list[dict[str, Any]]:
        sql = (
            "SELECT DISTINCT i.* FROM instances i WHERE i.instance_id IN "
            "(SELECT instance_id FROM tasks WHERE status = ? UNION SELECT instance_id FROM pending WHERE status = ?)"
        )
        rows = self.db.query(sql, [TaskStatus.WORKING.value, ElicitationStatus.PENDING.value])
        return [inst for inst in rows if not self.instance_alive(inst)]

    @_mapped
    def interrupt_orphans(self) -> list[str]:
        """What a dead instance left running: its calls become `interrupted` and its questions `rejected`.

        A 2026-07-28 call suspended on input is kept (its `request_state` is journaled): the next
        `serve` adopts it and re-drives it once its questions are answered.
        """
        done: list[str] = []
        for inst in self.dead_instances():
            last_seen = inst.get("stopped_at") or inst["heartbeat_at"]
            gone = f"emceepee stopped while this call was running (at {last_seen}, pid {inst['pid']})"
            params = [inst["instance_id"], TaskStatus.WORKING.value]
            for row in self.db.query(
                "SELECT task_id FROM tasks WHERE instance_id = ? AND status = ? AND request_state IS NULL",
                params,
            ):
                if self.finish_task(
                    row["task_id"], TaskStatus.INTERRUPTED, error=f"{gone}; the backend call was lost"
                ):
                    done.append(row["task_id"])
            self.db.execute(
                "UPDATE pending SET status = ?, error = ?, answered_at = ? WHERE instance_id = ? AND status = ? AND "
                "(task_id IS NULL OR task_id NOT IN (SELECT task_id FROM tasks WHERE request_state IS NOT NULL AND status = ?))",
                [
                    ElicitationStatus.REJECTED.value,
                    f"{gone}; the backend is no longer waiting for this answer",
                    now_iso(),
                    inst["instance_id"],
                    ElicitationStatus.PENDING.value,
                    TaskStatus.WORKING.value,
                ],
            )
        return done

    @_mapped
    def adopt_orphans(self, instance_id: str) -> list[str]:
        """Take over the suspended 2026-07-28 calls (and their questions) of dead instances."""
        adopted: list[str] = []
        for inst in self.dead_instances():
            rows = self.db.query(
                "SELECT task_id FROM tasks WHERE instance_id = ? AND status = ? AND request_state IS NOT NULL",
                [inst["instance_id"], TaskStatus.WORKING.value],
            )
            for row in rows:
                self.db.execute(
                    "UPDATE tasks SET instance_id = ?, last_updated_at = ? WHERE task_id = ?",
                    [instance_id, now_iso(), row["task_id"]],
                )
                self.db.execute(
                    "UPDATE pending SET instance_id = ? WHERE task_id = ? AND status = ?",
                    [instance_id, row["task_id"], ElicitationStatus.PENDING.value],
                )
                adopted.append(row["task_id"])
        return adopted

    # ---- tasks -------------------------------------------------------------------------

    @_mapped
    def insert_task(self, row: dict[str, Any]) -> None:
        self.db["tasks"].insert({**row, "args": json.dumps(row.get("args"))})

    @_mapped
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
            "finished_at = ?, last_updated_at = ? WHERE task_id = ? AND status = ?",
            [
                status.value,
                json.dumps(result) if result is not None else None,
                error,
                message,
                at,
                at,
                task_id,
                TaskStatus.WORKING.value,
            ],
        )
        return cursor.rowcount == 1

    @_mapped
    def update_progress(self, task_id: str, progress: dict[str, Any], message: str | None) -> None:
        self.db.execute(
            "UPDATE tasks SET progress = ?, status_message = coalesce(?, status_message), last_updated_at = ? "
            "WHERE task_id = ? AND status = ?",
            [json.dumps(progress), message, now_iso(), task_id, TaskStatus.WORKING.value],
        )

    @_mapped
    def request_cancel(self, task_id: str) -> bool:
        cursor = self.db.execute(
            "UPDATE tasks SET cancel_requested = 1, last_updated_at = ? WHERE task_id = ? AND status = ?",
            [now_iso(), task_id, TaskStatus.WORKING.value],
        )
        return cursor.rowcount == 1

    @_mapped
    def cancel_requests(self, instance_id: str) -> list[str]:
        sql = "SELECT task_id FROM tasks WHERE instance_id = ? AND status = ? AND cancel_requested = 1"
        return [r["task_id"] for r in self.db.query(sql, [instance_id, TaskStatus.WORKING.value])]

    @_mapped
    def task(self, task_id: str) -> dict[str, Any] | None:
        rows = list(self.db["tasks"].rows_where("task_id = ?", [task_id]))
        return rows[0] if rows else None

    @_mapped
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

    @_mapped
    def task_ids(self) -> list[str]:
        return [r["task_id"] for r in self.db.query("SELECT task_id FROM tasks")]

    @_mapped
    def purge_finished(self, retention_s: float) -> int:
        cursor = self.db.execute(
            "DELETE FROM tasks WHERE status != ? AND finished_at < ?",
            [TaskStatus.WORKING.value, now_iso(-retention_s)],
        )
        self.db.execute("DELETE FROM events WHERE created_at < ?", [now_iso(-retention_s)])
        return cursor.rowcount

    @_mapped
    def set_round(self, task_id: str, request_state: str | None, round_: int) -> None:
        self.db.execute(
            "UPDATE tasks SET request_state = ?, round = ?, last_updated_at = ? WHERE task_id = ?",
            [request_state, round_, now_iso(), task_id],
        )

    # ---- pending questions ---------------------------------------------------------------

    @_mapped
    def insert_pending(self, row: dict[str, Any]) -> None:
        self.db["pending"].insert({**row, "params": json.dumps(row["params"])})

    @_mapped
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
            "WHERE request_id = ? AND status = ?",
            [
                status,
                json.dumps(answer) if answer is not None else None,
                by,
                error,
                now_iso(),
                request_id,
                ElicitationStatus.PENDING.value,
            ],
        )
        return cursor.rowcount == 1

    @_mapped
    def set_forwarded(self, request_id: str, forwarded: bool) -> None:
        self.db.execute("UPDATE pending SET forwarded = ? WHERE request_id = ?", [int(forwarded), request_id])

    @_mapped
    def pending_row(self, request_id: str) -> dict[str, Any] | None:
        rows = list(self.db["pending"].rows_where("request_id = ?", [request_id]))
        return rows[0] if rows else None

    @_mapped
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

    @_mapped
    def pending_ids(self) -> list[str]:
        return [r["request_id"] for r in self.db.query("SELECT request_id FROM pending")]

    # ---- events ------------------------------------------------------------------------

    @_mapped
    def add_event(self, event: dict[str, Any]) -> None:
        self.db["events"].insert({**event, "data": json.dumps(event.get("data"))})

    @_mapped
    def set_cursor(self, session_id: str, event_id: str) -> None:
        self.db["cursors"].upsert(
            {"session_id": session_id, "last_event_id": event_id, "updated_at": now_iso()}, pk="session_id"
        )

    @_mapped
    def update_event_data(self, event_id: str, data: dict[str, Any]) -> None:
        self.db.execute("UPDATE events SET data = ? WHERE event_id = ?", [json.dumps(data), event_id])

    # ---- processes serve spawned (see core/leftovers.py) --------------------------------

    @_mapped
    def add_spawned(self, instance_id: str, server: str, pid: int, start_time: int) -> None:
        row = {"instance_id": instance_id, "server": server, "pid": pid, "start_time": start_time}
        self.db["spawned"].insert({**row, "spawned_at": now_iso()}, replace=True)

    @_mapped
    def forget_spawned(self, instance_id: str, pid: int) -> None:
        self.db.execute("DELETE FROM spawned WHERE instance_id = ? AND pid = ?", [instance_id, pid])

    @_mapped
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

    def __init__(self, journal: Journal) -> None:
        self.sync = journal
        self._limiter = anyio.CapacityLimiter(1)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.sync, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self.run(method, *args, **kwargs)

        return call
