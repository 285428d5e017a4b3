"""The journal's schema, as numbered migrations applied on every open.

A journal that has migrations this emceepee does not know was written by a newer version:
`check_not_newer` refuses it rather than let an old process write rows it does not understand.
"""

from __future__ import annotations

import sqlite_utils

from emceepee_cli.errors import JournalError

migrations = sqlite_utils.Migrations("emceepee")


@migrations()
def m001_initial(db: sqlite_utils.Database) -> None:
    db.table("instances").create(
        {
            "instance_id": str,
            "pid": int,
            "machine": str,
            "started_at": str,
            "heartbeat_at": str,
            "stopped_at": str,
            "host_name": str,
            "host_version": str,
        },
        pk="instance_id",
    )
    db.table("tasks").create(
        {
            "task_id": str,
            "instance_id": str,
            "server": str,
            "tool": str,
            "args": str,
            "status": str,
            "status_message": str,
            "progress": str,
            "result": str,
            "error": str,
            "created_at": str,
            "last_updated_at": str,
            "expires_at": str,
            "finished_at": str,
            "cancel_requested": int,
        },
        pk="task_id",
        not_null={"instance_id", "server", "tool", "status", "created_at", "last_updated_at"},
        defaults={"cancel_requested": 0},
    )
    db.table("tasks").create_index(["status", "instance_id"])
    db.table("events").create(
        {"event_id": str, "instance_id": str, "type": str, "server": str, "data": str, "created_at": str},
        pk="event_id",
    )
    db.table("events").create_index(["instance_id", "event_id"])
    db.table("cursors").create({"session_id": str, "last_event_id": str, "updated_at": str}, pk="session_id")


@migrations()
def m002_pending_and_rounds(db: sqlite_utils.Database) -> None:
    db.table("pending").create(
        {
            "request_id": str,
            "instance_id": str,
            "server": str,
            "kind": str,
            "params": str,
            "status": str,
            "task_id": str,
            "correlation": str,
            "input_key": str,
            "round": int,
            "forwarded": int,
            "created_at": str,
            "expires_at": str,
            "answered_at": str,
            "answered_by": str,
            "answer": str,
            "error": str,
        },
        pk="request_id",
        not_null={"instance_id", "server", "kind", "params", "status", "created_at", "expires_at"},
        defaults={"round": 0, "forwarded": 0},
    )
    db.table("pending").create_index(["status", "instance_id"])
    db.table("pending").create_index(["task_id", "round"])
    # A 2026-07-28 call suspended on input: its state and round survive a restart (see calls/tasks.py).
    db.table("tasks").add_column("request_state", str)
    db.table("tasks").add_column("round", int)


@migrations()
def m003_process_start(db: sqlite_utils.Database) -> None:
    # With the pid, the process's start time tells a live owner from a dead one whose pid was
    # reused, without trusting the heartbeat (see start_tokens.py). Rows from before stay NULL.
    db.table("instances").add_column("proc_start", str)


@migrations()
def m004_spawned(db: sqlite_utils.Database) -> None:
    # What each serve spawned, so a later process can stop what a dead one left running.
    db.table("spawned").create(
        {"instance_id": str, "server": str, "pid": int, "start_time": int, "spawned_at": str},
        pk=("instance_id", "pid"),
    )


@migrations()
def m005_listing_indexes(db: sqlite_utils.Database) -> None:
    # Every listing reads a page in task-id order (store/pages.py), and retention finds what is
    # old (store/retention.py), through an index: with months of history neither scans the table.
    tasks = db.table("tasks")
    tasks.create_index(["status", "task_id"])
    tasks.create_index(["server", "task_id"])
    tasks.create_index(["server", "status", "task_id"])
    tasks.create_index(["finished_at"])
    # The default listing (store/pages.py OPEN): what runs and what was lost, newest first.
    db.execute("CREATE INDEX idx_tasks_open ON tasks (task_id) WHERE status IN ('working', 'interrupted')")
    db.table("pending").create_index(["status", "request_id"])
    db.table("pending").create_index(["answered_at"])


@migrations()
def m006_chains_and_resume_tokens(db: sqlite_utils.Database) -> None:
    # One row per result a call produced: its chained steps and its automatic resumes, so that
    # nothing a backend said is lost even though the host gets only the last result.
    db.table("task_steps").create(
        {
            "task_id": str,
            "step": int,
            "kind": str,  # call | chain | resume
            "tool": str,
            "args": str,  # JSON
            "outcome": str,
            "text": str,  # the first text block, cut short
            "result": str,  # JSON: the whole CallToolResult
            "resume_token": str,  # the backend's nextResumeToken in that result
            "started_at": str,
            "finished_at": str,
        },
        pk=("task_id", "step"),
        not_null={"task_id", "step", "kind", "tool", "outcome", "started_at"},
    )
    # A resumable call: the backend's latest token, written before each re-issue, so a later
    # serve adopts an auto-resumed call (or shows the token) after a crash.
    db.table("tasks").add_column("resume_token", str)
    db.table("tasks").add_column("auto_resume", int)
    # An approval is an elicitation emceepee asks itself; a client's refusal keeps its code and data.
    db.table("pending").add_column("purpose", str)
    db.table("pending").add_column("approval", str)
    db.table("pending").add_column("error_detail", str)


@migrations()
def m007_host_rounds(db: sqlite_utils.Database) -> None:
    # The last input round a 2026-07-28 host answered for the call (calls/host_rounds.py): the
    # next retry must answer the one after, so a request_state is used once.
    db.table("tasks").add_column("host_round", int)


def check_not_newer(db: sqlite_utils.Database, path: str) -> None:
    known = {m.name for m in migrations.pending(sqlite_utils.Database(memory=True))}
    unknown = {m.name for m in migrations.applied(db)} - known
    if unknown:
        raise JournalError(
            f"The journal {path} was written by a newer emceepee"
            f" (it has migrations {', '.join(sorted(unknown))}).",
            hint="Upgrade emceepee, or use another journal with --db / EMCEEPEE_DB.",
        )
