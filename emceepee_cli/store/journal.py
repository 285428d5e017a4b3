"""The journal: one SQLite file (WAL, 0600) shared by every `serve` process and the CLI.

It is synchronous on purpose: the CLI uses it directly, and `serve` reaches it through one
worker thread (`store/aio.py`), so the event loop never blocks on SQLite. Writers that race
(two hosts, or the CLI and a host) are settled by SQLite itself: every state change is an
`UPDATE … WHERE status = 'working'`, so the first writer wins and the others see 0 rows. The
one exception is the owner itself: a live `serve` still finishes (and answers) its own rows that
another process settled as orphans by mistake (see store/instances.py).

A `serve` also keeps its journal file: if the file at the path is deleted or replaced while it
runs, `recover` re-creates it and writes back this process's own rows (store/recovery.py).

A `serve` whose journal file cannot be used when it starts (damaged, read-only, locked, newer)
gets one in memory instead (`for_serve`): `fault` says what is wrong with the file, which is left
as it is — never re-created, repaired or written — until a restart finds it fixed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from emceepee_cli import paths
from emceepee_cli.clock import now_iso
from emceepee_cli.errors import JournalError, NotFound
from emceepee_cli.ids import resolve_prefix
from emceepee_cli.redact import redact
from emceepee_cli.store import pages, proc
from emceepee_cli.store.db import check_writable, connect, file_id, in_memory, mapped
from emceepee_cli.store.events import EventLog
from emceepee_cli.store.instances import ORPHANED, Instances, owns_by_mistake
from emceepee_cli.store.records import (
    ElicitationStatus,
    LeftRow,
    PendingRow,
    SpawnedRow,
    TaskRow,
    TaskStatus,
    finishing,
    settling,
)
from emceepee_cli.store.recovery import Recovery
from emceepee_cli.store.results import Body, Results
from emceepee_cli.store.retention import Retention
from emceepee_cli.store.steps import Steps

MISTAKEN_ORPHAN = "(status = ? AND instance_id = ? AND error LIKE ?)"  # see owns_by_mistake
ID_LENGTH = 26  # a whole ULID: no prefix to resolve
TASKS_LISTED = "list_tasks(include_completed=true) shows the known tasks."
QUESTIONS_LISTED = "get_elicitations / get_sampling_requests list them."


class Journal(EventLog, Instances, Recovery, Results, Retention, Steps):
    def __init__(self, path: Path | None = None, *, fault: JournalError | None = None) -> None:
        """The journal at `path`; with a `fault`, one in memory standing in for that file."""
        self.path = paths.db_path(path)
        self.fault = fault
        self.db = connect(self.path) if fault is None else in_memory()
        self.file_id = file_id(self.path) if fault is None else None
        self.owner: str | None = None

    def __repr__(self) -> str:
        where = self.path if self.fault is None else f"memory (not {self.path})"
        return f"<Journal {where} owner={self.owner}>"

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

    @mapped
    def task_page(
        self, where: pages.TaskFilter, cursor: str | None, limit: int = pages.PAGE_SIZE
    ) -> pages.TaskPage:
        """A page of the task listing, newest first (store/pages.py)."""
        return pages.read_page(lambda sql, params: list(self.db.query(sql, params)), where, cursor, limit)

    @mapped
    def close(self) -> None:
        self.db.close()

    @mapped
    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap "anything new?" check."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    # ---- tasks -------------------------------------------------------------------------

    @mapped
    def insert_task(self, row: TaskRow) -> None:
        self.db.table("tasks").insert(dict(row))

    @mapped
    def finish_task(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        message: str | None = None,
        body: Body | None = None,
    ) -> bool:
        """Move a working task to a final state; False if someone else finished it first.

        `body`: its result as the bytes the host gets, kept as they are (store/results.py)."""
        at = now_iso()
        kept = body is not None
        sql = (
            f"UPDATE tasks SET status = ?, result = {'zeroblob(?)' if kept else '?'}, error = ?,"
            " status_message = coalesce(?, status_message), finished_at = ?, last_updated_at = ?"
            f" WHERE task_id = ? AND (status = ? OR {MISTAKEN_ORPHAN})"
        )
        params = [
            finishing(status).value,
            body.size if body is not None else json.dumps(result) if result is not None else None,
            redact(error) if error else error,
            message,
            at,
            at,
            task_id,
            TaskStatus.WORKING.value,
            TaskStatus.INTERRUPTED.value,
            self.owner,
            ORPHANED + "%",
        ]
        if body is None:
            return self.db.execute(sql, params).rowcount == 1
        with self.db.conn:  # the row and its bytes in one transaction
            self.db.execute("BEGIN IMMEDIATE")
            ended = self.db.execute(sql, params).rowcount == 1
            if ended:
                self.write_body(task_id, body)
        return ended

    @mapped
    def update_progress(self, task_id: str, progress: dict[str, Any], message: str | None) -> None:
        self.db.execute(
            "UPDATE tasks SET progress = ?, status_message = coalesce(?, status_message),"
            " last_updated_at = ? WHERE task_id = ? AND status = ?",
            [json.dumps(progress), message, now_iso(), task_id, TaskStatus.WORKING.value],
        )

    @mapped
    def set_status_message(self, task_id: str, message: str) -> None:
        self.db.execute(
            "UPDATE tasks SET status_message = ?, last_updated_at = ? WHERE task_id = ? AND status = ?",
            [message, now_iso(), task_id, TaskStatus.WORKING.value],
        )

    @mapped
    def set_expiry(self, task_id: str, expires_at: str) -> None:
        self.db.execute(
            "UPDATE tasks SET expires_at = ?, last_updated_at = ? WHERE task_id = ? AND status = ?",
            [expires_at, now_iso(), task_id, TaskStatus.WORKING.value],
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
    def task(self, task_id: str, *, whole: bool = True) -> TaskRow | None:
        """The task's row; `whole=False` leaves out a result kept as the host's bytes (its `result`
        is None then: store/results.py reads it a piece at a time)."""
        rows = [
            cast(TaskRow, r)
            for r in self.db.table("tasks").rows_where("task_id = ?", [task_id], select=self._columns(whole))
        ]
        if not rows:
            return None
        row = rows[0]
        if owns_by_mistake(self.owner, row, TaskStatus.INTERRUPTED):
            # still ours and still running, until the watcher's `reclaim` writes it back
            row = row.copy()
            row["status"], row["error"], row["finished_at"] = TaskStatus.WORKING.value, None, None
        return row

    def _columns(self, whole: bool) -> str:
        if whole:
            return "*"
        names = [c.name for c in self.db.table("tasks").columns]
        kept = "CASE WHEN typeof(result) = 'blob' THEN NULL ELSE result END AS result"
        return ", ".join(kept if name == "result" else f"[{name}]" for name in names)

    @mapped
    def tasks(
        self,
        *,
        server: str | None = None,
        status: str | None = None,
        include_finished: bool = False,
        instance_id: str | None = None,
    ) -> list[TaskRow]:
        where, params = [], []
        for column, value in (("server", server), ("status", status), ("instance_id", instance_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if status is None and not include_finished:
            where.append("status = ?")
            params.append(TaskStatus.WORKING.value)
        rows = self.db.table("tasks").rows_where(" AND ".join(where) or None, params, order_by="task_id")
        return [cast(TaskRow, r) for r in rows]

    @mapped
    def resolve_task(self, prefix: str, also: Iterable[str] = (), listing: str = TASKS_LISTED) -> str:
        """The task id that `prefix` starts (a whole id is taken as it is); `also`: ids of tasks only
        this process knows (their rows could not be journaled)."""
        if len(prefix) == ID_LENGTH:
            return prefix.upper()
        return resolve_prefix(prefix, [*self._ids_like("tasks", "task_id", prefix), *also], "task", listing)

    @mapped
    def set_round(self, task_id: str, request_state: str | None, round_: int) -> None:
        self.db.execute(
            "UPDATE tasks SET request_state = ?, round = ?, last_updated_at = ? WHERE task_id = ?",
            [request_state, round_, now_iso(), task_id],
        )

    # ---- pending questions ---------------------------------------------------------------

    @mapped
    def insert_pending(self, row: PendingRow) -> None:
        self.db.table("pending").insert(dict(row))

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
        kind = self.db.execute("SELECT kind FROM pending WHERE request_id = ?", [request_id]).fetchone()
        if kind is None:
            return False
        cursor = self.db.execute(
            "UPDATE pending SET status = ?, answer = ?, answered_by = ?, error = ?, answered_at = ? "
            f"WHERE request_id = ? AND (status = ? OR {MISTAKEN_ORPHAN})",
            [
                settling(kind[0], status),
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
    def pending_row(self, request_id: str) -> PendingRow | None:
        rows = [
            cast(PendingRow, r) for r in self.db.table("pending").rows_where("request_id = ?", [request_id])
        ]
        if not rows:
            return None
        row = rows[0]
        if owns_by_mistake(self.owner, row, ElicitationStatus.REJECTED):
            # still ours and still open, until the watcher's `reclaim` writes it back
            row = row.copy()
            row["status"], row["error"], row["answered_at"] = ElicitationStatus.PENDING.value, None, None
        return row

    @mapped
    def pending_rows(
        self,
        *,
        status: str | None = "pending",
        instance_id: str | None = None,
        server: str | None = None,
        kind: str | None = None,
        task_id: str | None = None,
    ) -> list[PendingRow]:
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
        rows = self.db.table("pending").rows_where(" AND ".join(where) or None, params, order_by="request_id")
        return [cast(PendingRow, r) for r in rows]

    @mapped
    def resolve_question(
        self, prefix: str, listing: str = QUESTIONS_LISTED, what: str = "pending request"
    ) -> PendingRow:
        """The question whose id `prefix` starts, or a NotFound naming where they are listed."""
        if len(prefix) == ID_LENGTH:
            request_id = prefix.upper()
        else:
            found = self._ids_like("pending", "request_id", prefix)
            request_id = resolve_prefix(prefix, found, what, listing)
        row = self.pending_row(request_id)
        if row is None:
            raise NotFound(f"No {what} '{prefix}'.", hint=listing)
        return row

    def _ids_like(self, table: str, key: str, prefix: str) -> list[str]:
        """The ids in `table` that start with `prefix` (as typed, in capitals as ULIDs are, or in small
        letters), found as ranges of the primary key: a LIKE would read every row of a long history."""
        found: set[str] = set()
        typed = prefix.strip()
        for start in {typed, typed.upper(), typed.lower()} - {""}:
            end = start[:-1] + chr(ord(start[-1]) + 1)
            sql = f"SELECT {key} FROM {table} WHERE {key} >= ? AND {key} < ?"
            found.update(str(r[key]) for r in self.db.query(sql, [start, end]))
        return sorted(found)

    # ---- processes serve spawned (see backends/leftovers.py) --------------------------------

    @mapped
    def add_spawned(self, instance_id: str, server: str, pid: int, start_time: int) -> None:
        row = SpawnedRow(
            instance_id=instance_id, server=server, pid=pid, start_time=start_time, spawned_at=now_iso()
        )
        self.db.table("spawned").insert(dict(row), replace=True)

    @mapped
    def forget_spawned(self, instance_id: str, pid: int) -> None:
        self.db.execute("DELETE FROM spawned WHERE instance_id = ? AND pid = ?", [instance_id, pid])

    @mapped
    def spawned_by_dead(self) -> list[LeftRow]:
        """What instances that are no longer alive spawned on this machine (and did not see end)."""
        rows = self.db.query(
            "SELECT i.*, s.server AS spawned_server, s.pid AS spawned_pid, s.start_time AS spawned_start,"
            " s.spawned_at FROM spawned s JOIN instances i USING (instance_id)"
        )
        dead, stale = [], []
        for row in rows:  # the instance's own columns, as instance_alive reads them
            if row["machine"] != socket.gethostname():
                continue
            if proc.other_boot(row.get("proc_start")):  # its processes died with that boot: a pid and
                stale.append((row["instance_id"], row["spawned_pid"]))  # start tick now name another
                continue
            if not self.instance_alive(cast(Any, row)):
                dead.append(
                    LeftRow(
                        instance_id=row["instance_id"],
                        server=row["spawned_server"],
                        pid=row["spawned_pid"],
                        start_time=row["spawned_start"],
                        spawned_at=row["spawned_at"],
                        serve_pid=row["pid"],
                    )
                )
        for instance_id, pid in stale:
            self.forget_spawned(instance_id, pid)
        return dead
