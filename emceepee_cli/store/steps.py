"""The `task_steps` table and a task's resume columns: every result a call produced.

A chain (`_meta.nextTool` followed) and an automatic resume (`nextResumeToken` followed) each
give the host only the last result; every earlier one is kept here, whole, under its task, so
`get_task` can show it. A resumable call's latest backend token is written to its task row
*before* the call is re-issued with it, so a `serve` that dies mid-resume leaves enough for the
next one to go on (see store/instances.py, `adopt_orphans`).

An ended step (`ok` or `tool_error`) whose `result` is NULL is a call's only step, whose result
is the task's own, journaled once in the task row as the bytes the host gets (store/results.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import sqlite_utils

from emceepee_cli.clock import now_iso
from emceepee_cli.store.db import mapped
from emceepee_cli.store.records import StepRow


class Steps:
    """The steps half of the journal (mixed into `Journal`)."""

    path: Path
    db: sqlite_utils.Database

    @mapped
    def put_steps(self, rows: list[StepRow]) -> None:
        """Write (or rewrite) steps: a step is written when it starts and again when it ends."""
        if rows:
            self.db.table("task_steps").insert_all([dict(r) for r in rows], replace=True)

    @mapped
    def steps(self, task_id: str) -> list[StepRow]:
        rows = self.db.table("task_steps").rows_where("task_id = ?", [task_id], order_by="step")
        return [cast(StepRow, r) for r in rows]

    @mapped
    def set_resume(self, task_id: str, token: str | None, auto: bool) -> None:
        self.db.execute(
            "UPDATE tasks SET resume_token = ?, auto_resume = ?, last_updated_at = ? WHERE task_id = ?",
            [token, int(auto), now_iso(), task_id],
        )

    @mapped
    def set_error_detail(self, request_id: str, detail: dict[str, object]) -> None:
        self.db.execute(
            "UPDATE pending SET error_detail = ? WHERE request_id = ? AND status = 'pending'",
            [json.dumps(detail), request_id],
        )
