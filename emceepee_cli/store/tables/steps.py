"""The `task_steps` table: every result a call produced.

A chain (`_meta.nextTool` followed) and an automatic resume (`nextResumeToken` followed) each
give the host only the last result; every earlier one is kept here, whole, under its task, so
`get_task` can show it. A resumable call's latest backend token is written to its task row
(store/tables/tasks.py, `set_resume`) *before* the call is re-issued with it, so a `serve` that dies
mid-resume leaves enough for the next one to go on (see store/tables/instances.py, `adopt_orphans`).

An ended step (`ok` or `tool_error`) whose `result` is NULL is a call's only step, whose result
is the task's own, journaled once in the task row as the bytes the host gets (store/tables/results.py).
"""

from __future__ import annotations

from typing import cast

from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped
from emceepee_cli.store.records import StepRow


class Steps(Part):
    """The journal's task steps (`journal.steps`): holds only the journal's connection, for its lifetime."""

    @mapped
    def put(self, rows: list[StepRow]) -> None:
        """Write (or rewrite) steps: a step is written when it starts and again when it ends."""
        if rows:
            self.db.table("task_steps").insert_all([dict(r) for r in rows], replace=True)

    @mapped
    def rows(self, task_id: str) -> list[StepRow]:
        """The task's steps, in order."""
        rows = self.db.table("task_steps").rows_where("task_id = ?", [task_id], order_by="step")
        return [cast(StepRow, r) for r in rows]
