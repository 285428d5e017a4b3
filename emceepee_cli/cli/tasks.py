"""`emceepee tasks …`: the journal's tasks, from any terminal, whether or not `serve` runs.

The journal and the core are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import json as jsonlib
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from emceepee_cli.cli import render
from emceepee_cli.cli.options import DbOpt, JsonOpt
from emceepee_cli.errors import JournalError, NotFound, UsageError

if TYPE_CHECKING:
    from emceepee_cli.store.journal import Journal
    from emceepee_cli.store.records import TaskRow

app = typer.Typer(
    help="List, inspect and cancel tasks (tool calls that outlived their wait).", no_args_is_help=True
)

IdArg = Annotated[str, typer.Argument(help="A task id, or any unique prefix of one.")]
LISTING = "See them with: emceepee tasks list --all"
PAGE_SIZE, MAX_PAGE = 50, 500  # as store/pages.py, which the CLI does not import at start-up
STATUSES = ("working", "completed", "failed", "cancelled", "expired", "interrupted")


def open_journal(db: Path | None) -> Journal:
    """The journal, with what dead `serve` processes left settled first (best effort)."""
    from emceepee_cli.core import leftovers
    from emceepee_cli.store.journal import Journal

    journal = Journal(db)
    with suppress(JournalError):  # best effort: a journal that cannot be written can still be read
        journal.interrupt_orphans()  # a task whose process died says so here too
    with suppress(JournalError):
        leftovers.reap(journal)  # and a backend it left running is stopped
    return journal


def find(journal: Journal, task_id: str) -> TaskRow:
    """The task `task_id` (a unique prefix will do) names."""
    row = journal.task(journal.resolve_task(task_id, listing=LISTING))
    if row is None:
        raise NotFound(f"No task '{task_id}'.", hint=LISTING)
    return row


@app.command("list")
def list_(
    status: Annotated[str | None, typer.Option(help="Only tasks in this state.")] = None,
    server: Annotated[str | None, typer.Option(help="Only tasks of this server.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include finished tasks.")] = False,
    limit: Annotated[
        int, typer.Option(help="Tasks per page, newest first.", min=1, max=MAX_PAGE)
    ] = PAGE_SIZE,
    cursor: Annotated[str | None, typer.Option(help="Where the previous page said to go on.")] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """List tasks (by default, those still working), newest first, a page at a time."""
    from emceepee_cli.store.pages import TaskFilter
    from emceepee_cli.store.records import task_json

    if status is not None and status not in STATUSES:
        raise UsageError(f"Unknown status '{status}'.", hint=f"Use one of: {', '.join(STATUSES)}.")
    page = open_journal(db).task_page(TaskFilter(server, status, all_), cursor, limit)
    rows = [task_json(r) for r in page["tasks"]]
    if json:
        render.as_json({**page, "tasks": rows})
        return
    render.table(
        "Tasks",
        ("id", "status", "server", "tool", "created", "detail"),
        (
            (
                t["task_id"],
                t["status"],
                t["server"],
                t["tool"],
                t["created_at"],
                t.get("error") or t.get("status_message") or "",
            )
            for t in rows
        ),
        empty="No tasks." + ("" if all_ else " (--all includes finished ones)"),
    )
    if "next_cursor" in page:
        words = [f"--status {status}"] if status else []
        words += [f"--server {server}"] if server else []
        words += ["--all"] if all_ else []
        words += [f"--limit {limit}"] if limit != PAGE_SIZE else []
        words += ["--cursor", page["next_cursor"]]
        more = f"{page['more']}+" if page.get("more_at_least") else str(page["more"])
        render.line(f"{more} more; next page: emceepee tasks list {' '.join(words)}")


@app.command("show")
def show(task_id: IdArg, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Show one task."""
    from emceepee_cli.store.records import task_json

    task = task_json(find(open_journal(db), task_id))
    if json:
        render.as_json({"task": task})
        return
    for key, value in task.items():
        render.line(f"{key:>16}: {value}")


@app.command("result")
def result(task_id: IdArg, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Print a finished task's result (as the backend sent it)."""
    from emceepee_cli.core.calls import outcome

    out = outcome(find(open_journal(db), task_id))
    if isinstance(out, dict):
        raise UsageError(f"Task {out['task']['task_id']} is still working.", hint="Try again later.")
    if json:
        render.as_json(out.model_dump(by_alias=True, mode="json", exclude_none=True))
        return
    for block in out.content:
        render.line(
            getattr(block, "text", None) or jsonlib.dumps(block.model_dump(mode="json", exclude_none=True))
        )


@app.command("cancel")
def cancel(task_id: IdArg, db: DbOpt = None) -> None:
    """Ask the emceepee process that owns a working task to cancel its backend call."""
    journal = open_journal(db)
    row = find(journal, task_id)
    if row["status"] != "working" or not journal.request_cancel(row["task_id"]):
        now = journal.task(row["task_id"]) or row
        raise UsageError(f"Task {row['task_id']} is already {now['status']}.")
    render.line(
        f"Asked the emceepee process that owns task {row['task_id']} to cancel it"
        " (it checks several times a second)."
    )
