"""The `pending` table: the questions (elicitations, sampling requests) a backend asked, and their answers.

A question is answered once: `settle` is an `UPDATE … WHERE status = 'pending'`, so when a host,
the CLI and a timeout race, the first writer wins and the others see 0 rows. As for tasks
(store/tables/tasks.py), a live `serve` still settles — and reads as open — its own questions that
another process rejected as orphans by mistake, until it takes them back (store/tables/instances.py).
"""

from __future__ import annotations

import json
from typing import Any, cast

from emceepee_cli.clock import now_iso
from emceepee_cli.errors import NotFound
from emceepee_cli.redact import redact
from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped
from emceepee_cli.store.orphans import MISTAKEN_ORPHAN, ORPHANED, owns_by_mistake
from emceepee_cli.store.prefixes import resolve_id
from emceepee_cli.store.records import ElicitationStatus, PendingRow, settling

QUESTIONS_LISTED = "get_elicitations / get_sampling_requests list them."


class Pending(Part):
    """The journal's questions (`journal.pending`): holds only the journal's connection, for its lifetime."""

    @mapped
    def insert(self, row: PendingRow) -> None:
        self.db.table("pending").insert(dict(row))

    @mapped
    def settle(
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
                self.connection.owner,
                ORPHANED + "%",
            ],
        )
        return cursor.rowcount == 1

    @mapped
    def set_error_detail(self, request_id: str, detail: dict[str, object]) -> None:
        self.db.execute(
            "UPDATE pending SET error_detail = ? WHERE request_id = ? AND status = 'pending'",
            [json.dumps(detail), request_id],
        )

    @mapped
    def row(self, request_id: str) -> PendingRow | None:
        rows = [
            cast(PendingRow, r) for r in self.db.table("pending").rows_where("request_id = ?", [request_id])
        ]
        if not rows:
            return None
        row = rows[0]
        if owns_by_mistake(self.connection.owner, row, ElicitationStatus.REJECTED):
            # still ours and still open, until the watcher's `reclaim` writes it back
            row = row.copy()
            row["status"], row["error"], row["answered_at"] = ElicitationStatus.PENDING.value, None, None
        return row

    @mapped
    def rows(
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
    def resolve(
        self, prefix: str, listing: str = QUESTIONS_LISTED, what: str = "pending request"
    ) -> PendingRow:
        """The question whose id `prefix` starts, or a NotFound naming where they are listed."""
        request_id = resolve_id(self.db, "pending", "request_id", prefix, what=what, listing=listing)
        row = self.row(request_id)
        if row is None:
            raise NotFound(f"No {what} '{prefix}'.", hint=listing)
        return row
