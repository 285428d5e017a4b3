"""The journal file: schema by migrations, refusal of newer ones, permissions, first writer wins."""

from __future__ import annotations

import multiprocessing
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from emceepee_cli.clock import now_iso
from emceepee_cli.errors import JournalError
from emceepee_cli.store import faults, inspect
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.migrations import migrations
from emceepee_cli.store.records import Event, PendingRow, TaskRow, TaskStatus
from tests.support import as_pending_row, as_task_row, status_of


def task_row(task_id: str, instance_id: str) -> TaskRow:
    at = now_iso()
    return as_task_row(
        {
            "task_id": task_id,
            "instance_id": instance_id,
            "server": "s",
            "tool": "t",
            "args": {"a": 1},
            "status": "working",
            "created_at": at,
            "last_updated_at": at,
        }
    )


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
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('emceepee', 'm999_future', 'x')"
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
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('emceepee', 'm999_future', 'x')"
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


@pytest.mark.parametrize("page_size", [4096, 65536])  # 65536 is written as 1 in the header
def test_a_file_cut_inside_a_page_is_damaged_and_an_empty_file_is_a_new_journal(
    tmp_path: Path, page_size: int
) -> None:
    whole = tmp_path / "whole.db"
    with sqlite3.connect(whole) as conn:
        conn.execute(f"PRAGMA page_size = {page_size}")
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert whole.stat().st_size % page_size == 0
    cut = tmp_path / "cut.db"
    cut.write_bytes(whole.read_bytes()[:-1])
    empty = tmp_path / "empty.db"
    empty.touch()

    assert faults.torn(whole, page_size) is None and faults.torn(empty, page_size) is None
    for reader in (Journal, inspect.status):
        with pytest.raises(JournalError, match="not a whole number of its") as refused:
            reader(cut)
        assert refused.value.hint is not None and refused.value.hint.startswith("mv ")
    assert cut.read_bytes() == whole.read_bytes()[:-1]
    Journal(empty).instances.register("I")  # as today: created in place
    assert "instances" in sqlite_utils.Database(empty).table_names()


def test_the_journal_is_private_to_the_user(emceepee_home: Path) -> None:
    journal = Journal()
    journal.instances.register("I")
    assert journal.path.parent == emceepee_home / "data"
    assert stat.S_IMODE(os.stat(journal.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(journal.path.parent).st_mode) == 0o700
    for sidecar in ("-wal", "-shm"):
        assert stat.S_IMODE(os.stat(str(journal.path) + sidecar).st_mode) == 0o600


def test_a_task_is_finished_once_by_whoever_is_first(tmp_path: Path) -> None:
    first, second = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    first.instances.register("I")
    first.tasks.insert(task_row("T", "I"))
    assert first.tasks.finish("T", TaskStatus.COMPLETED, result={"content": []}) is True
    assert second.tasks.finish("T", TaskStatus.CANCELLED, error="late") is False
    row = second.tasks.row("T")
    assert row is not None and row["status"] == "completed" and row["error"] is None


def test_working_tasks_of_a_dead_instance_become_interrupted_and_live_ones_stay(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("LIVE")
    journal.instances.register("DEAD")
    dead_pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout
    journal.db.execute("UPDATE instances SET pid = ? WHERE instance_id = 'DEAD'", [int(dead_pid)])
    journal.tasks.insert(task_row("T1", "LIVE"))
    journal.tasks.insert(task_row("T2", "DEAD"))
    assert journal.instances.interrupt_orphans() == ["T2"]
    assert status_of(journal.tasks.row("T1")) == "working"
    row = journal.tasks.row("T2")
    assert row is not None and row["status"] == "interrupted"
    error = row["error"] or ""
    assert f"pid {int(dead_pid)}" in error and "the backend call was lost" in error


def test_a_cancel_request_is_seen_by_the_owner_through_data_version(tmp_path: Path) -> None:
    owner, cli = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    owner.instances.register("I")
    owner.tasks.insert(task_row("T", "I"))
    version = owner.data_version()
    assert cli.tasks.request_cancel("T") is True
    assert owner.data_version() != version
    assert owner.tasks.cancel_requests("I") == ["T"]


def test_finished_tasks_past_the_retention_are_purged_and_working_ones_kept(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("I")
    for task_id in ("OLD", "NEW", "RUNNING"):
        journal.tasks.insert(task_row(task_id, "I"))
    journal.tasks.finish("OLD", TaskStatus.COMPLETED, result={"content": []})
    journal.tasks.finish("NEW", TaskStatus.COMPLETED, result={"content": []})
    journal.db.execute("UPDATE tasks SET finished_at = ? WHERE task_id = 'OLD'", [now_iso(-7200)])
    assert journal.retention.purge_finished(retention_s=3600) == 1
    assert [t["task_id"] for t in journal.tasks.rows(include_finished=True)] == ["NEW", "RUNNING"]


def _open_at_the_barrier(path: str, barrier: Any, errors: Any) -> None:
    barrier.wait()
    try:
        journal = Journal(Path(path))
        journal.instances.register(f"I{os.getpid()}")
        journal.close()
    except Exception as exc:  # noqa: BLE001 - reported to the test, which names it
        errors.put(f"{type(exc).__name__}: {exc}")


def test_many_processes_opening_a_fresh_journal_at_the_same_instant_all_open(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    path, barrier, errors = str(tmp_path / "j.db"), context.Barrier(8), context.Queue()
    workers = [context.Process(target=_open_at_the_barrier, args=(path, barrier, errors)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert errors.empty(), errors.get()
    journal = Journal(Path(path))
    assert len(list(journal.db["instances"].rows)) == 8
    assert migrations.pending(journal.db) == []


def test_a_live_owner_is_alive_however_stale_its_heartbeat_and_a_reused_pid_is_not(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("ME")
    journal.db.execute("UPDATE instances SET heartbeat_at = ?", [now_iso(-24 * 3600)])
    me = journal.instances.row("ME")
    assert me is not None and me["proc_start"]
    assert journal.instances.alive(me) is True
    assert journal.instances.alive({**me, "proc_start": "linux:another-boot:1"}) is False  # pid reused
    assert journal.instances.alive({**me, "stopped_at": now_iso()}) is False
    # an old row without a start time, or one from another machine, can only go by the heartbeat
    assert journal.instances.alive({**me, "proc_start": None}) is False
    assert journal.instances.alive({**me, "machine": "elsewhere", "heartbeat_at": now_iso()}) is True


def _adopt_at_the_barrier(path: str, barrier: Any, claims: Any) -> None:
    journal = Journal(Path(path))
    me = f"I{os.getpid()}"
    journal.instances.register(me)
    barrier.wait()
    try:
        claims.put((me, journal.instances.adopt_orphans(me)))
    except Exception as exc:  # noqa: BLE001 - reported to the test, which names it
        claims.put((me, f"{type(exc).__name__}: {exc}"))


def test_the_suspended_calls_of_a_dead_owner_are_each_claimed_by_exactly_one_serve(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    setup = Journal(path)
    setup.instances.register("DEAD")
    setup.db.execute("UPDATE instances SET pid = ?", [_exited_pid()])
    suspended = [f"T{i:02d}" for i in range(30)]
    for task_id in suspended:
        setup.tasks.insert(task_row(task_id, "DEAD"))
        setup.pending.insert(pending_row(f"Q{task_id}", "DEAD", task_id=task_id))
    setup.db.execute("UPDATE tasks SET request_state = 'opaque'")
    context = multiprocessing.get_context("spawn")
    barrier, claims = context.Barrier(6), context.Queue()
    serves = [
        context.Process(target=_adopt_at_the_barrier, args=(str(path), barrier, claims)) for _ in range(6)
    ]
    for serve in serves:
        serve.start()
    results = [claims.get(timeout=60) for _ in serves]
    for serve in serves:
        serve.join(timeout=60)
    assert all(isinstance(ids, list) for _, ids in results), results
    claimed = [task_id for _, ids in results for task_id in ids]
    assert sorted(claimed) == suspended  # every call once: no call re-driven twice, none left behind
    owners = {me: ids for me, ids in results}
    for task_id in suspended:
        row, question = setup.tasks.row(task_id), setup.pending.row(f"Q{task_id}")
        assert row is not None and question is not None
        assert task_id in owners[row["instance_id"]] and question["instance_id"] == row["instance_id"]


def test_an_interrupted_task_says_whose_process_it_was_and_a_time_not_before_its_own(tmp_path: Path) -> None:
    Journal(tmp_path / "j.db").instances.register("DEAD")
    journal = Journal(tmp_path / "j.db")  # the CLI's: it owns nothing
    journal.db.execute("UPDATE instances SET pid = ?, heartbeat_at = ?", [_exited_pid(), now_iso(-4)])
    journal.tasks.insert(task_row("T", "DEAD"))  # created after the owner's last heartbeat
    journal.pending.insert(pending_row("Q", "DEAD"))
    assert journal.instances.interrupt_orphans() == ["T"]
    task, question = journal.tasks.row("T"), journal.pending.row("Q")
    assert task is not None and question is not None
    dead = journal.instances.row("DEAD")
    assert dead is not None
    pid = dead["pid"]
    for row, own in ((task, task["created_at"]), (question, question["created_at"])):
        error = row["error"] or ""
        assert f"pid {pid} on {socket.gethostname()}" in error
        times = re.findall(r"\d{4}-\d\d-\d\dT[\d:.]+Z", error)
        assert times and all(t >= own for t in times), (row["error"], own)


def test_a_live_serve_takes_back_its_rows_that_another_process_settled_as_orphans(tmp_path: Path) -> None:
    serve, elsewhere = Journal(tmp_path / "j.db"), Journal(tmp_path / "j.db")
    serve.instances.register("ME")
    for task_id in ("T1", "T2"):
        serve.tasks.insert(task_row(task_id, "ME"))
    serve.pending.insert(pending_row("Q", "ME", task_id="T1"))
    # another machine (or an older emceepee) takes this serve for dead and settles its rows
    elsewhere.db.execute("UPDATE instances SET machine = 'elsewhere', heartbeat_at = ?", [now_iso(-3600)])
    assert sorted(elsewhere.instances.interrupt_orphans()) == ["T1", "T2"]
    assert status_of(elsewhere.pending.row("Q")) == "rejected"
    # the serve still sees them as its own, and takes back those it is still running
    assert status_of(serve.tasks.row("T1")) == "working"
    assert status_of(serve.pending.row("Q")) == "pending"
    assert serve.instances.reclaim("ME", ["T1"], ["Q"]) == ["T1", "Q"]
    assert status_of(elsewhere.tasks.row("T1")) == "working"
    assert status_of(elsewhere.pending.row("Q")) == "pending"
    assert status_of(elsewhere.tasks.row("T2")) == "interrupted"  # not running here any more: left alone
    # a result that arrives before the watcher reclaims is still written
    assert serve.tasks.finish("T2", TaskStatus.COMPLETED, result={"content": []}) is True
    assert status_of(elsewhere.tasks.row("T2")) == "completed"


def test_a_deleted_journal_is_re_created_with_this_processs_rows(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    serve = Journal(path)
    serve.instances.register("ME")
    serve.tasks.insert(task_row("T", "ME"))
    serve.pending.insert(pending_row("Q", "ME", task_id="T"))
    assert serve.recover() is None
    path.unlink()
    said = serve.recover()
    assert said is not None and "re-created" in said and "1 task(s)" in said
    assert serve.recover() is None
    fresh = Journal(path)
    assert status_of(fresh.tasks.row("T")) == "working"
    assert status_of(fresh.pending.row("Q")) == "pending"
    assert fresh.instances.row("ME") is not None
    assert serve.tasks.finish("T", TaskStatus.COMPLETED, result={"content": []}) is True
    assert status_of(fresh.tasks.row("T")) == "completed"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def pending_row(request_id: str, instance_id: str, task_id: str | None = None) -> PendingRow:
    return as_pending_row(
        {
            "request_id": request_id,
            "instance_id": instance_id,
            "server": "s",
            "kind": "elicitation",
            "params": {"message": "?", "requested_schema": {"type": "object"}},
            "status": "pending",
            "task_id": task_id,
            "correlation": "exact",
            "created_at": now_iso(),
            "expires_at": now_iso(600),
        }
    )


def _exited_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    assert done.wait(timeout=30) == 0
    return done.pid


def event(n: int) -> Event:
    return Event(event_id=f"E{n:03d}", type="task_status", server="s", created_at=now_iso(), data={"n": n})


def test_the_events_a_dead_instance_never_delivered_are_claimed_once_and_a_live_ones_never(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("LIVE")  # this test's own pid: alive
    journal.instances.register("DEAD")
    journal.db.execute("UPDATE instances SET pid = ? WHERE instance_id = 'DEAD'", [_exited_pid()])
    for n in range(5):
        journal.events.add({**event(n), "instance_id": "DEAD"})
        journal.events.add({**event(100 + n), "instance_id": "LIVE"})
    journal.events.set_cursor("DEAD", "E001")  # its host had these two
    first = journal.events.claim("ME", limit=2)
    rest = journal.events.claim("OTHER", limit=100)
    assert [(e["event_id"], e.get("replayed")) for e in first] == [("E002", True), ("E003", True)]
    assert [e["event_id"] for e in rest] == ["E004"] and rest[0]["data"] == {"n": 4}
    assert journal.events.claim("LATE", limit=100) == []


def _claim_at_the_barrier(path: str, barrier: Any, claims: Any) -> None:
    journal = Journal(Path(path))
    me = f"I{os.getpid()}"
    journal.instances.register(me)
    barrier.wait()
    try:
        claims.put([e["event_id"] for e in journal.events.claim(me, limit=1000)])
    except Exception as exc:  # noqa: BLE001 - reported to the test, which names it
        claims.put(f"{type(exc).__name__}: {exc}")


def test_serves_starting_together_each_deliver_a_dead_instances_events_once_in_all(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    setup = Journal(path)
    for dead in ("D1", "D2", "D3"):
        setup.instances.register(dead)
        setup.db.execute("UPDATE instances SET pid = ? WHERE instance_id = ?", [_exited_pid(), dead])
        for n in range(20):
            setup.events.add({**event(n), "event_id": f"{dead}-{n:02d}", "instance_id": dead})
    context = multiprocessing.get_context("spawn")
    barrier, claims = context.Barrier(4), context.Queue()
    serves = [
        context.Process(target=_claim_at_the_barrier, args=(str(path), barrier, claims)) for _ in range(4)
    ]
    for serve in serves:
        serve.start()
    results = [claims.get(timeout=60) for _ in serves]
    for serve in serves:
        serve.join(timeout=60)
    assert all(isinstance(ids, list) for ids in results), results
    claimed = [event_id for ids in results for event_id in ids]
    assert sorted(claimed) == sorted(f"{d}-{n:02d}" for d in ("D1", "D2", "D3") for n in range(20))


def test_the_cheap_reader_knows_every_migration(tmp_path: Path) -> None:
    """`tasks list` reads a journal with these migrations without sqlite-utils (store/inspect.py)."""
    path = tmp_path / "j.db"
    Journal(path).close()
    assert inspect.current(path)
    assert [m.name for m in migrations.pending(sqlite_utils.Database(memory=True))] == list(
        inspect.KNOWN_MIGRATIONS
    )


def test_a_host_back_from_a_dead_fleet_takes_over_its_own_sessions_calls_and_events_only(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "j.db")
    gone = _exited_pid()
    for session in ("A", "B"):  # two hosts' sessions of a fleet that was killed
        journal.instances.register(session)
        journal.tasks.insert(task_row(f"T{session}", session))
        journal.events.add({**event(ord(session)), "instance_id": session})
    journal.db.execute("UPDATE instances SET pid = ?", [gone])
    journal.db.execute("UPDATE tasks SET request_state = 'opaque'")
    journal.instances.register("A2")  # host A's session in the new fleet
    assert journal.instances.adopt_orphans("A2", only="A") == ["TA"]
    assert [e["event_id"] for e in journal.events.claim("A2", limit=100, only="A")] == ["E065"]
    assert journal.instances.adopt_orphans("C", only="Z") == []  # no such session: nothing else taken
    # A new host's session leaves them to their hosts for a minute; then takes what is left.
    assert journal.instances.adopt_orphans("C", spare=True) == []
    assert journal.events.claim("C", limit=100, spare=True) == []
    journal.db.execute("UPDATE instances SET heartbeat_at = ? WHERE instance_id = 'B'", [now_iso(-3600)])
    assert journal.instances.adopt_orphans("C", spare=True) == ["TB"]
    assert [e["event_id"] for e in journal.events.claim("C", limit=100, spare=True)] == ["E066"]
