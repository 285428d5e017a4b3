"""The journal file: schema by migrations, refusal of newer ones, permissions, first writer wins."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from emceepee_cli.errors import JournalError
from emceepee_cli.store.journal import Journal, now_iso
from emceepee_cli.store.migrations import migrations
from emceepee_cli.store.records import TaskStatus


def task_row(task_id: str, instance_id: str) -> dict[str, object]:
    at = now_iso()
    return {
        "task_id": task_id,
        "instance_id": instance_id,
        "server": "s",
        "tool": "t",
        "args": {"a": 1},
        "status": "working",
        "created_at": at,
        "last_updated_at": at,
    }


def test_a_blank_database_reaches_the_current_schema(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    assert {"instances", "tasks", "events", "cursors"} <= set(journal.db.table_names())
    assert migrations.pending(journal.db) == []
    assert journal.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_journal_from_a_newer_emceepee_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Journal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('emceepee', 'm999_future', 'x')"
        )
    before = path.read_bytes()
    with pytest.raises(JournalError, match="written by a newer emceepee") as caught:
        Journal(path)
    assert "m999_future" in caught.value.message and "--db" in (caught.value.hint or "")
    assert path.read_bytes() == before


def test_the_cli_refuses_a_newer_journal_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    Journal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('emceepee', 'm999_future', 'x')"
        )
    done = subprocess.run(
        [sys.executable, "-m", "emceepee_cli", "tasks", "list", "--db", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4
    assert "newer emceepee" in done.stderr and "Traceback" not in done.stderr


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    path.write_text("not a database, just text " * 100)
    with pytest.raises(JournalError, match="not a usable SQLite file"):
        Journal(path)


def test_the_journal_is_private_to_the_user(emceepee_home: Path) -> None:
    journal = Journal()
    journal.register_instance("I")
    assert journal.path.parent == emceepee_home / "data"
    assert stat.S_IMODE(os.stat(journal.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(journal.path.parent).st_mode) == 0o700
    for sidecar in ("-wal", "-shm"):
        assert stat.S_IMODE(os.stat(str(journal.path) + sidecar).st_mode) == 0o600


def test_a_task_is_finished_once_by_whoever_is_first(tmp_path: Path) -> None:
    first, second = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    first.register_instance("I")
    first.insert_task(task_row("T", "I"))
    assert first.finish_task("T", TaskStatus.COMPLETED, result={"content": []}) is True
    assert second.finish_task("T", TaskStatus.CANCELLED, error="late") is False
    row = second.task("T")
    assert row is not None and row["status"] == "completed" and row["error"] is None


def test_working_tasks_of_a_dead_instance_become_interrupted_and_live_ones_stay(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.register_instance("LIVE")
    journal.register_instance("DEAD")
    dead_pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout
    journal.db.execute("UPDATE instances SET pid = ? WHERE instance_id = 'DEAD'", [int(dead_pid)])
    journal.insert_task(task_row("T1", "LIVE"))
    journal.insert_task(task_row("T2", "DEAD"))
    assert journal.interrupt_orphans() == ["T2"]
    assert journal.task("T1")["status"] == "working"  # type: ignore[index]
    row = journal.task("T2")
    assert row is not None and row["status"] == "interrupted"
    assert f"pid {int(dead_pid)}" in row["error"] and "the backend call was lost" in row["error"]


def test_a_cancel_request_is_seen_by_the_owner_through_data_version(tmp_path: Path) -> None:
    owner, cli = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    owner.register_instance("I")
    owner.insert_task(task_row("T", "I"))
    version = owner.data_version()
    assert cli.request_cancel("T") is True
    assert owner.data_version() != version
    assert owner.cancel_requests("I") == ["T"]


def test_finished_tasks_past_the_retention_are_purged_and_working_ones_kept(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.register_instance("I")
    for task_id in ("OLD", "NEW", "RUNNING"):
        journal.insert_task(task_row(task_id, "I"))
    journal.finish_task("OLD", TaskStatus.COMPLETED, result={"content": []})
    journal.finish_task("NEW", TaskStatus.COMPLETED, result={"content": []})
    journal.db.execute("UPDATE tasks SET finished_at = ? WHERE task_id = 'OLD'", [now_iso(-7200)])
    assert journal.purge_finished(retention_s=3600) == 1
    assert sorted(journal.task_ids()) == ["NEW", "RUNNING"]
