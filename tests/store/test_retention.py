"""Retention: what outlived it leaves in bounded batches (and only that), and the file shrinks."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ulid import ULID

from emceepee_cli.clock import now_iso
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskStatus
from emceepee_cli.store.retention import COMPACT_PAGES, INCREMENTAL
from tests.support import as_task_row

DAY_S = 86_400


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds")[:23] + "Z"


def old_rows(journal: Journal, count: int, *, days_ago: float, instance: str = "GONE") -> None:
    """`count` finished tasks, events and answered questions of `instance`, made `days_ago` days ago."""
    at = datetime.now(UTC) - timedelta(days=days_ago)
    stamp = iso(at)
    ids = [str(ULID.from_timestamp(at.timestamp() + n / 1000)) for n in range(count)]
    db = journal.db.conn
    db.executemany(
        "INSERT INTO tasks (task_id, instance_id, server, tool, args, status, result, created_at,"
        " last_updated_at, finished_at) VALUES (?, ?, 's', 't', '{}', 'completed', ?, ?, ?, ?)",
        [(i, instance, json.dumps({"content": [{"text": "x" * 400}]}), stamp, stamp, stamp) for i in ids],
    )
    db.executemany(
        "INSERT INTO events (event_id, instance_id, type, server, data, created_at)"
        " VALUES (?, ?, 'task_finished', 's', ?, ?)",
        [(i, instance, json.dumps({"n": "y" * 200}), stamp) for i in ids],
    )
    db.executemany(
        "INSERT INTO pending (request_id, instance_id, server, kind, params, status, created_at, expires_at,"
        " answered_at) VALUES (?, ?, 's', 'elicitation', '{}', 'accepted', ?, ?, ?)",
        [(i, instance, stamp, stamp, stamp) for i in ids],
    )


def counts(journal: Journal) -> dict[str, int]:
    return {
        table: journal.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("tasks", "events", "pending", "instances", "cursors")
    }


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("LIVE")
    journal.db.execute(
        "INSERT INTO instances (instance_id, pid, machine, started_at, heartbeat_at, stopped_at)"
        " VALUES ('GONE', 1, 'elsewhere', ?, ?, ?)",
        [now_iso(-3 * DAY_S)] * 3,
    )
    journal.events.set_cursor("GONE", "~")
    return journal


def test_a_purge_goes_in_batches_of_at_most_the_limit_table_by_table(journal: Journal) -> None:
    old_rows(journal, 25, days_ago=2)
    batches = []
    while deleted := journal.retention.purge_batch(DAY_S, limit=10):
        batches.append((deleted, counts(journal)))
    assert [n for n, _ in batches] == [10, 10, 5, 10, 10, 5, 10, 10, 5, 1]
    assert batches[2][1]["tasks"] == 0 and batches[2][1]["events"] == 25  # tasks first, then events
    assert counts(journal) == {"tasks": 0, "events": 0, "pending": 0, "instances": 1, "cursors": 0}


def test_a_purge_keeps_what_is_recent_open_running_or_alive(journal: Journal) -> None:
    old_rows(journal, 3, days_ago=2)
    old_rows(journal, 4, days_ago=0.5)  # within the retention
    at = now_iso(-2 * DAY_S)
    journal.db.execute(  # old, but still working, and a question still open: never purged
        "INSERT INTO tasks (task_id, instance_id, server, tool, status, created_at, last_updated_at)"
        " VALUES ('WORKING', 'LIVE', 's', 't', 'working', ?, ?)",
        [at, at],
    )
    journal.db.execute(
        "INSERT INTO pending (request_id, instance_id, server, kind, params, status, created_at, expires_at)"
        " VALUES ('OPEN', 'LIVE', 's', 'elicitation', '{}', 'pending', ?, ?)",
        [at, at],
    )
    journal.db.execute(  # long stopped, but what it spawned was never seen to end: kept, to be reaped
        "INSERT INTO instances (instance_id, pid, machine, started_at, heartbeat_at, stopped_at)"
        " VALUES ('SPAWNER', 2, 'elsewhere', ?, ?, ?)",
        [at, at, at],
    )
    journal.spawned.add("SPAWNER", "s", 99999, 1)
    journal.instances.heartbeat("LIVE")
    journal.db.execute("UPDATE instances SET heartbeat_at = ? WHERE instance_id = 'LIVE'", [at])
    assert journal.retention.purge_finished(DAY_S) == 3 * 3 + 1  # the old rows, and instance GONE
    remaining = {r[0] for r in journal.db.execute("SELECT task_id FROM tasks")}
    assert "WORKING" in remaining and len(remaining) == 5
    assert journal.pending.rows()[0]["request_id"] == "OPEN"
    assert {r[0] for r in journal.db.execute("SELECT instance_id FROM instances")} == {"LIVE", "SPAWNER"}
    assert counts(journal)["events"] == 4


def test_a_stale_instance_that_never_said_it_stopped_is_kept_while_its_process_lives(
    journal: Journal,
) -> None:
    journal.db.execute(  # this very process, silent for days (a laptop asleep): still alive
        "UPDATE instances SET heartbeat_at = ? WHERE instance_id = 'LIVE'", [now_iso(-3 * DAY_S)]
    )
    journal.db.execute(  # a process that is gone (pid 1 started long before this row says)
        "INSERT INTO instances (instance_id, pid, machine, started_at, heartbeat_at, proc_start)"
        " VALUES ('CRASHED', ?, ?, ?, ?, 'not-its-start')",
        [os.getpid(), os.uname().nodename, now_iso(-3 * DAY_S), now_iso(-3 * DAY_S)],
    )
    journal.retention.purge_finished(DAY_S)
    assert {r[0] for r in journal.db.execute("SELECT instance_id FROM instances")} == {"LIVE"}


def test_space_goes_back_to_the_disk_a_bounded_step_at_a_time(journal: Journal, tmp_path: Path) -> None:
    assert journal.db.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL  # a new journal
    old_rows(journal, 3000, days_ago=2)
    journal.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    full = (tmp_path / "j.db").stat().st_size
    journal.retention.purge_finished(DAY_S)
    freed = []
    while step := journal.retention.compact():
        freed.append(step)
    journal.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert len(freed) > 1 and max(freed) <= COMPACT_PAGES
    assert journal.db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert (tmp_path / "j.db").stat().st_size < full / 4


def older_journal(path: Path, rows: int) -> None:
    """A journal as an emceepee before incremental vacuum made it: auto_vacuum off."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE filler (x)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("z" * 1000,)] * rows)
    assert Journal(path).db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0


def test_an_older_small_journal_is_converted_once_and_a_large_one_left_to_reuse_its_pages(
    tmp_path: Path,
) -> None:
    older_journal(tmp_path / "small.db", 10)
    small = Journal(tmp_path / "small.db")
    assert small.retention.convert_to_incremental() is True
    assert small.db.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL
    assert small.retention.convert_to_incremental() is False  # nothing left to do
    older_journal(tmp_path / "large.db", 2000)
    large = Journal(tmp_path / "large.db")
    assert large.retention.convert_to_incremental(max_bytes=1024 * 1024) is False
    assert large.db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    large.db.execute("DELETE FROM filler")
    assert large.retention.compact() == 0  # its free pages stay for new rows
    assert large.db.execute("PRAGMA freelist_count").fetchone()[0] > 0


def test_a_finished_task_past_the_retention_is_purged_whatever_its_id(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("I")
    at = now_iso()
    for task_id in ("old-one", "new-one"):
        journal.tasks.insert(
            as_task_row(
                {
                    "task_id": task_id,
                    "instance_id": "I",
                    "server": "s",
                    "tool": "t",
                    "status": "working",
                    "created_at": at,
                    "last_updated_at": at,
                }
            )
        )
        journal.tasks.finish(task_id, TaskStatus.COMPLETED, result={"content": []})
    journal.db.execute("UPDATE tasks SET finished_at = ? WHERE task_id = 'old-one'", [now_iso(-7200)])
    assert journal.retention.purge_batch(3600) == 1
    assert [t["task_id"] for t in journal.tasks.rows(include_finished=True)] == ["new-one"]
