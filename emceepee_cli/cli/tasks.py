"""`emceepee tasks …`: the journal's tasks, from any terminal, whether or not `serve` runs.

The journal and the serve parts are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import json as jsonlib
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import DbOpt, JsonOpt
from emceepee_cli.cli.terminal import render
from emceepee_cli.clock import age
from emceepee_cli.errors import JournalError, NotFound, UsageError

if TYPE_CHECKING:
    from emceepee_cli.store.journal import Journal
    from emceepee_cli.store.pages import TaskFilter, TaskPage
    from emceepee_cli.store.records import TaskRow

app = typer.Typer(
    help="List, inspect and cancel tasks (tool calls that outlived their wait).", no_args_is_help=True
)

IdArg = Annotated[str, typer.Argument(help="A task id, or any unique prefix of one.")]
LISTING = "See them with: emceepee tasks list --all"
PAGE_SIZE, MAX_PAGE_SIZE = 50, 500  # as store/pages.py, not imported until a command runs
STATUSES = ("working", "completed", "failed", "cancelled", "expired", "interrupted")
# `tasks result`'s exit code for each way a task can stand (main.py lists them with the others).
RESULT_EXIT_CODES = {
    "completed": 0,
    "failed": 3,
    "working": 5,
    "cancelled": 6,
    "expired": 7,
    "interrupted": 8,
}


def open_journal(db: Path | None) -> Journal:
    """The journal, with what dead `serve` processes left settled first (best effort)."""
    from emceepee_cli.backends import leftovers
    from emceepee_cli.store.journal import Journal

    journal = Journal(db)
    with suppress(JournalError):  # best effort: a journal that cannot be written can still be read
        journal.instances.interrupt_orphans()  # a task whose process died says so here too
    with suppress(JournalError):
        leftovers.reap(journal)  # and a backend it left running is stopped
    return journal


def reading_tasks(db: Path | None, where: TaskFilter, cursor: str | None, limit: int) -> TaskPage:
    """The journal's tasks, read cheaply (plain read-only SQLite) unless a dead `serve` left
    something to settle first: then through the journal, as every other command reads them."""
    from emceepee_cli import paths
    from emceepee_cli.store import inspect

    path = paths.db_path(db)
    if not inspect.current(path) or inspect.left_by_dead(path):
        open_journal(db)  # creates, migrates or refuses the file; settles what the dead left
    return inspect.task_page(path, where, cursor, limit)


def find(journal: Journal, task_id: str) -> TaskRow:
    """The task `task_id` (a unique prefix will do) names."""
    row = journal.tasks.row(journal.tasks.resolve(task_id, listing=LISTING))
    if row is None:
        raise NotFound(f"No task '{task_id}'.", hint=LISTING)
    return row


@app.command("list")
def list_(
    status: Annotated[str | None, typer.Option(help="Only tasks in this state.")] = None,
    server: Annotated[str | None, typer.Option(help="Only tasks of this server.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include finished tasks.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help=f"Tasks per page, newest first (1 to {MAX_PAGE_SIZE}).")
    ] = PAGE_SIZE,
    cursor: Annotated[str | None, typer.Option(help="Where the previous page said to go on.")] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """List tasks, newest first, a page at a time: by default those still working and those an
    emceepee that stopped interrupted."""
    from emceepee_cli.store.records import task_json

    if status is not None and status not in STATUSES:
        raise UsageError(f"Unknown status '{status}'.", hint=f"Use one of: {', '.join(STATUSES)}.")
    if not 1 <= limit <= MAX_PAGE_SIZE:  # checked here: a typer range would load pydantic at start-up
        raise UsageError(f"--limit {limit} is out of range.", hint=f"Use 1 to {MAX_PAGE_SIZE} tasks a page.")
    from emceepee_cli.store.pages import TaskFilter

    page = reading_tasks(db, TaskFilter(server, status, all_), cursor, limit)
    rows = [task_json(r) for r in page["tasks"]]
    if json:
        render.as_json({**page, "tasks": rows})
        return
    render.table(
        "Tasks",
        ("id", "status", "call", "age", "detail"),
        (
            (
                t["task_id"],
                t["status"],
                f"{t['server']}.{t['tool']}",
                age(t["created_at"]),
                t.get("error") or t.get("status_message") or progress_text(t.get("progress")),
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
    """Show one task: its call, its state and, once it has one, its result."""
    from emceepee_cli.store.records import task_json

    row = find(open_journal(db), task_id)
    token = _resume_token(row)
    if json:
        task = task_json(row)
        if token is not None:
            task["resume_token"] = token
        render.as_json({"task": task})
        return
    render.fields([*describe(row), ("resume token", token)] if token else describe(row))
    if row["status"] == "completed" and row["result"]:
        from emceepee_cli.calls.call import outcome
        from emceepee_cli.cli.terminal.results import show_result

        render.line("result:")
        found = outcome(row)
        assert not isinstance(found, dict)  # a completed task has its result
        show_result(found, None, row["tool"], indent="  ")


def _resume_token(row: TaskRow) -> str | None:
    """The resume token get_task shows for this task (signed with this install's key, expiring with
    the config's retention), so a person can hand it on: with it, execute_tool waits for a working
    task's result, or goes on with a call that was interrupted holding a backend's resume token."""
    from emceepee_cli import paths, seal
    from emceepee_cli.config import Defaults, load_config
    from emceepee_cli.errors import EmceepeeError

    if not seal.resumable(row):
        return None
    retention_s = Defaults().retention_s
    with suppress(EmceepeeError, OSError):  # a config that cannot be read: the default retention
        retention_s = load_config(paths.config_path(None)).defaults.retention_s
    try:
        key = seal.install_key()
    except (seal.InstallKeyError, OSError) as exc:  # the rest of the task still shows
        render.note(f"(no resume token: {exc})")
        return None
    return seal.task_resume_token(key, row, retention_s)


def describe(row: TaskRow) -> list[tuple[str, str | None]]:
    """A task as `label: value` pairs, in the order a person reads them."""
    times = (
        ("created", row["created_at"]),
        ("updated", row["last_updated_at"]),
        ("finished", row.get("finished_at")),
    )
    when = [(label, f"{at} ({age(at)} ago)") for label, at in times if at]
    pairs: list[tuple[str, str | None]] = [
        ("task", row["task_id"]),
        ("status", row["status"] + (" (cancel requested)" if row.get("cancel_requested") else "")),
        ("call", f"{row['server']}.{row['tool']}"),
        ("args", row.get("args")),
        *when,
        ("expires", row.get("expires_at") if row["status"] == "working" else None),
        ("progress", progress_text(_json(row.get("progress")))),
        ("message", row.get("status_message")),
        ("error", row.get("error")),
    ]
    return [(label, value) for label, value in pairs if value]


def progress_text(progress: dict[str, Any] | None) -> str:
    """`3/10`, `40%`-free and plain: what a backend reported as progress (and total, and message)."""
    if not progress:
        return ""
    done, total = progress.get("progress"), progress.get("total")
    text = _number(done) + (f"/{_number(total)}" if total is not None else "")
    return text + (f" {progress['message']}" if progress.get("message") else "")


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _json(text: str | None) -> dict[str, Any] | None:
    value = jsonlib.loads(text) if text else None
    return value if isinstance(value, dict) else None


@app.command("result")
def result(
    task_id: IdArg,
    out: Annotated[Path, typer.Option("--out", help="Folder for images and other binary content.")] = Path(
        "."
    ),
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Print a finished task's result (as the backend sent it; images and files saved to --out).

    Exits 0 with the result; 3 if the tool answered with an error (the result is printed) or the
    task failed; 5 if it is still working; 6 if it was cancelled, 7 if it expired, 8 if it was
    interrupted (its emceepee stopped).
    """
    from emceepee_cli.calls.call import TaskEnded, outcome
    from emceepee_cli.cli.terminal.results import show_result
    from emceepee_cli.errors import BackendError
    from emceepee_cli.store.records import TaskStatus

    row = find(open_journal(db), task_id)
    try:
        found = outcome(row)
    except TaskEnded as exc:
        exc.exit_code = RESULT_EXIT_CODES[exc.status]
        raise
    if isinstance(found, dict):
        raise StillWorking(
            f"Task {row['task_id']} is still working.",
            hint=f"Try again later; emceepee tasks show {row['task_id']} shows its progress.",
        )
    if json:  # the result says isError itself: one document, and the exit code
        render.as_json(found.model_dump(by_alias=True, mode="json", exclude_none=True))
        if found.is_error:
            raise typer.Exit(RESULT_EXIT_CODES[TaskStatus.FAILED])
        return
    show_result(found, out, row["tool"])
    if found.is_error:
        raise BackendError(
            f"The tool '{row['tool']}' answered with an error (shown above).", hint="Its message says why."
        )


class StillWorking(UsageError):
    """`tasks result` of a task that has no result yet."""

    exit_code = 5


@app.command("cancel")
def cancel(task_id: IdArg, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Ask the emceepee process that owns a working task to cancel its backend call."""
    from emceepee_cli.store.records import task_json

    journal = open_journal(db)
    row = find(journal, task_id)
    if row["status"] != "working" or not journal.tasks.request_cancel(row["task_id"]):
        now = journal.tasks.row(row["task_id"]) or row
        raise UsageError(f"Task {row['task_id']} is already {now['status']}; there is nothing to cancel.")
    message = (
        f"Asked the emceepee process that owns task {row['task_id']} to cancel it"
        " (it checks several times a second)."
    )
    if json:  # as cancel_task says it when another process owns the task
        render.as_json({"task": task_json(row), "cancel_requested": True, "message": message})
        return
    render.line(message)
