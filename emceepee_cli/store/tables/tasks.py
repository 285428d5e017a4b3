"""The `tasks` table: one row per call the host may ask about later, from `working` to its end.

Writers that race (two hosts, or the CLI and a host) are settled by SQLite itself: every state
change is an `UPDATE … WHERE status = 'working'`, so the first writer wins and the others see 0
rows. The one exception is the owner itself: a live `serve` still finishes its own tasks that
another process settled as orphans by mistake, and reads them as still working until it takes
them back (store/tables/instances.py, `reclaim`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from emceepee_cli.clock import now_iso
from emceepee_cli.redact import redact
from emceepee_cli.store import pages
from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped
from emceepee_cli.store.orphans import MISTAKEN_ORPHAN, ORPHANED, owns_by_mistake
from emceepee_cli.store.prefixes import resolve_id
from emceepee_cli.store.records import TaskRow, TaskStatus, finishing
from emceepee_cli.store.tables.results import Body, write_body

TASKS_LISTED = "list_tasks(include_completed=true) shows the known tasks."


class Tasks(Part):
    """The journal's tasks (`journal.tasks`): holds only the journal's connection, for its lifetime."""

    @mapped
    def insert(self, row: TaskRow) -> None:
        self.db.table("tasks").insert(dict(row))

    @mapped
    def finish(
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

        `body`: its result as the bytes the host gets, kept as they are (store/tables/results.py)."""
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
            self.connection.owner,
            ORPHANED + "%",
        ]
        if body is None:
            return self.db.execute(sql, params).rowcount == 1
        with self.db.conn:  # the row and its bytes in one transaction
            self.db.execute("BEGIN IMMEDIATE")
            ended = self.db.execute(sql, params).rowcount == 1
            if ended:
                write_body(self.db, task_id, body)
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
    def set_round(self, task_id: str, request_state: str | None, round_: int) -> None:
        self.db.execute(
            "UPDATE tasks SET request_state = ?, round = ?, last_updated_at = ? WHERE task_id = ?",
            [request_state, round_, now_iso(), task_id],
        )

    @mapped
    def host_round(self, task_id: str) -> int:
        """The last input round the host answered for the task (0: none yet)."""
        rows = list(self.db.query("SELECT host_round FROM tasks WHERE task_id = ?", [task_id]))
        return int(rows[0]["host_round"] or 0) if rows else 0

    @mapped
    def take_host_round(self, task_id: str, number: int) -> bool:
        """Mark round `number` answered, once: False if it was already (a replay), or was not the
        next one."""
        cursor = self.db.execute(
            "UPDATE tasks SET host_round = ?, last_updated_at = ?"
            " WHERE task_id = ? AND coalesce(host_round, 0) = ?",
            [number, now_iso(), task_id, number - 1],
        )
        return cursor.rowcount == 1

    @mapped
    def set_resume(self, task_id: str, token: str | None, auto: bool) -> None:
        """A resumable call's latest backend token, written *before* the call is re-issued with it,
        so a `serve` that dies mid-resume leaves enough for the next one to go on (store/tables/steps.py)."""
        self.db.execute(
            "UPDATE tasks SET resume_token = ?, auto_resume = ?, last_updated_at = ? WHERE task_id = ?",
            [token, int(auto), now_iso(), task_id],
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
    def row(self, task_id: str, *, whole: bool = True) -> TaskRow | None:
        """The task's row; `whole=False` leaves out a result kept as the host's bytes (its `result`
        is None then: store/tables/results.py reads it a piece at a time)."""
        rows = [
            cast(TaskRow, r)
            for r in self.db.table("tasks").rows_where("task_id = ?", [task_id], select=self._columns(whole))
        ]
        if not rows:
            return None
        row = rows[0]
        if owns_by_mistake(self.connection.owner, row, TaskStatus.INTERRUPTED):
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
    def rows(
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
    def page(
        self, where: pages.TaskFilter, cursor: str | None, limit: int = pages.PAGE_SIZE
    ) -> pages.TaskPage:
        """A page of the task listing, newest first (store/pages.py)."""
        return pages.read_page(lambda sql, params: list(self.db.query(sql, params)), where, cursor, limit)

    @mapped
    def resolve(self, prefix: str, also: Iterable[str] = (), listing: str = TASKS_LISTED) -> str:
        """The task id that `prefix` starts (a whole id is taken as it is); `also`: ids of tasks only
        this process knows (their rows could not be journaled)."""
        return resolve_id(self.db, "tasks", "task_id", prefix, what="task", listing=listing, also=also)
