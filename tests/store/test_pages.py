"""Tasks listed a page at a time: newest first, a cursor that holds while tasks are added, clear
errors for a cursor that is not one a listing gave, and an index behind every listing query."""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from pathlib import Path

import pytest

from emceepee_cli.clock import now_iso
from emceepee_cli.errors import UsageError
from emceepee_cli.ids import new_id
from emceepee_cli.store import inspect
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.pages import TaskFilter, TaskPage
from emceepee_cli.store.records import TaskRow, TaskStatus
from tests.support import as_task_row


def add_tasks(journal: Journal, count: int, *, server: str = "s", finished: bool = True) -> list[str]:
    ids = []
    for _ in range(count):
        task_id, at = new_id(), now_iso()
        journal.tasks.insert(
            as_task_row(
                {
                    "task_id": task_id,
                    "instance_id": "I",
                    "server": server,
                    "tool": "t",
                    "args": "{}",
                    "status": "working",
                    "created_at": at,
                    "last_updated_at": at,
                }
            )
        )
        if finished:
            journal.tasks.finish(task_id, TaskStatus.COMPLETED, result={"content": []})
        ids.append(task_id)
    return ids


def every_page(journal: Journal, where: TaskFilter, limit: int) -> list[TaskPage]:
    pages = [journal.tasks.page(where, None, limit)]
    while "next_cursor" in pages[-1]:
        pages.append(journal.tasks.page(where, pages[-1]["next_cursor"], limit))
    return pages


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    journal = Journal(tmp_path / "j.db")
    journal.instances.register("I")
    return journal


def test_pages_list_every_task_once_newest_first_and_say_how_many_are_left(journal: Journal) -> None:
    ids = add_tasks(journal, 23)
    pages = every_page(journal, TaskFilter(include_finished=True), 10)
    assert [len(p["tasks"]) for p in pages] == [10, 10, 3]
    assert [p.get("more") for p in pages] == [13, 3, None]
    assert [t["task_id"] for p in pages for t in p["tasks"]] == ids[::-1]


def test_a_page_carries_each_tasks_state_and_never_its_result(journal: Journal, tmp_path: Path) -> None:
    """A result can be many MB: a listing reads none of them, on the journal's connection or the
    CLI's read-only one; the task itself still has it."""
    [task_id] = add_tasks(journal, 1, finished=False)
    big = {"content": [{"type": "text", "text": "x" * 2_000_000}]}
    journal.tasks.finish(task_id, TaskStatus.COMPLETED, result=big)
    where = TaskFilter(include_finished=True)
    [listed] = journal.tasks.page(where, None, 10)["tasks"]
    [read_only] = inspect.task_page(tmp_path / "j.db", where, None, 10)["tasks"]
    assert listed["status"] == read_only["status"] == "completed"
    assert listed["result"] is None and read_only["result"] is None
    whole = journal.tasks.row(task_id)
    assert whole is not None and whole["result"] is not None and len(whole["result"]) > 2_000_000


def test_a_cursor_holds_while_another_process_adds_tasks(journal: Journal, tmp_path: Path) -> None:
    before = add_tasks(journal, 12)
    where = TaskFilter(include_finished=True)
    first = journal.tasks.page(where, None, 5)
    other = Journal(tmp_path / "j.db")  # a second writer: another serve, on the same file
    added = add_tasks(other, 7)
    rest: list[TaskRow] = []
    cursor = first["next_cursor"]
    while cursor:
        page = journal.tasks.page(where, cursor, 5)
        rest += page["tasks"]
        cursor = page.get("next_cursor", "")
    listed = [t["task_id"] for t in [*first["tasks"], *rest]]
    assert listed == before[::-1]  # nothing twice, nothing skipped, the new ones not mixed in
    fresh = journal.tasks.page(where, None, 7)
    assert [t["task_id"] for t in fresh["tasks"]] == added[::-1] and fresh.get("more") == 12


def test_filters_page_through_only_their_tasks(journal: Journal) -> None:
    add_tasks(journal, 6, server="a")
    wanted = add_tasks(journal, 7, server="b")
    working = add_tasks(journal, 4, server="b", finished=False)
    by_server = every_page(journal, TaskFilter(server="b", include_finished=True), 3)
    assert [t["task_id"] for p in by_server for t in p["tasks"]] == (wanted + working)[::-1]
    done = every_page(journal, TaskFilter(server="b", status="completed"), 3)
    assert [t["task_id"] for p in done for t in p["tasks"]] == wanted[::-1]
    default = every_page(journal, TaskFilter(), 3)  # without include_finished: only working ones
    assert [t["task_id"] for p in default for t in p["tasks"]] == working[::-1]


@pytest.mark.parametrize(
    "cursor",
    ["not-a-cursor", "", "....", "eyJhIjoxfQ.AAAAAAAAAAA", "x" * 500],
    ids=["garbage", "empty", "dots", "made-up", "long"],
)
def test_a_garbage_or_made_up_cursor_is_refused_clearly(journal: Journal, cursor: str) -> None:
    add_tasks(journal, 3)
    with pytest.raises(UsageError) as refused:
        journal.tasks.page(TaskFilter(include_finished=True), cursor, 2)
    assert "is not one a task listing gave" in refused.value.message
    assert "leave it out to start again" in (refused.value.hint or "")
    assert len(refused.value.message) < 200  # a long cursor is not echoed whole


def test_an_edited_cursor_is_refused_and_one_from_other_filters_names_them(journal: Journal) -> None:
    add_tasks(journal, 5)
    cursor = journal.tasks.page(TaskFilter(include_finished=True), None, 2)["next_cursor"]
    body, check = cursor.split(".")
    flipped = body[:-3] + ("A" if body[-3] != "A" else "B") + body[-2:]
    with pytest.raises(UsageError, match="is not one a task listing gave"):
        journal.tasks.page(TaskFilter(include_finished=True), f"{flipped}.{check}", 2)
    with pytest.raises(UsageError, match="other filters") as other:
        journal.tasks.page(TaskFilter(server="s", include_finished=True), cursor, 2)
    assert "include_completed=True" in other.value.message


def explained(journal: Journal, run: object) -> list[str]:
    """The query plans of the SELECTs and DELETEs a journal method ran (as SQLite ran them, values bound)."""
    statements: list[str] = []
    journal.db.conn.set_trace_callback(statements.append)
    try:
        assert callable(run)
        run()
    finally:
        journal.db.conn.set_trace_callback(None)
    plans = []
    for sql in statements:
        if sql.lstrip().upper().startswith(("SELECT", "DELETE", "WITH")) and "sqlite_master" not in sql:
            rows = journal.db.conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
            plans.append(sql + "\n  " + "\n  ".join(str(r[3]) for r in rows))
    assert plans, statements
    return plans


SMALL = ("SCAN i",)  # instances: a row per serve start, and the purge keeps them few


def full_scans(plans: list[str]) -> list[str]:
    """Plans that read a whole table, or sort every row it matched."""
    bad = []
    for plan in plans:
        for step in plan.splitlines()[1:]:
            step = step.strip()
            subquery = step.startswith("SCAN (subquery")  # reading a LIMITed subquery's own rows
            whole = step.startswith("SCAN ") and " USING " not in step and step not in SMALL and not subquery
            if whole or "TEMP B-TREE FOR ORDER BY" in step:
                bad.append(plan)
    return bad


def resolve_quietly(journal: Journal, prefix: str) -> None:
    with suppress(UsageError):  # several ids share the prefix: it says so, after the query
        journal.tasks.resolve(prefix)


def test_every_listing_query_is_served_by_an_index(journal: Journal) -> None:
    add_tasks(journal, 30)
    add_tasks(journal, 3, server="b", finished=False)
    # No ANALYZE: the journal never runs it, and its statistics for a table this small favour scans.
    page = journal.tasks.page(TaskFilter(include_finished=True), None, 10)
    newest = page["tasks"][0]["task_id"]
    listings = [
        lambda: journal.tasks.page(TaskFilter(), None, 2),
        lambda: journal.tasks.page(TaskFilter(include_finished=True), None, 10),
        lambda: journal.tasks.page(TaskFilter(include_finished=True), page["next_cursor"], 10),
        lambda: journal.tasks.page(TaskFilter(server="s", include_finished=True), None, 10),
        lambda: journal.tasks.page(TaskFilter(server="b", status="working"), None, 1),
        lambda: journal.tasks.page(TaskFilter(status="failed"), None, 10),
        lambda: journal.pending.rows(),
        lambda: resolve_quietly(journal, newest[:12].lower()),
        lambda: journal.retention.purge_batch(3600),
    ]
    plans = [plan for run in listings for plan in explained(journal, run)]
    assert full_scans(plans) == [], "\n\n".join(full_scans(plans))


def test_the_scan_check_sees_a_full_scan(journal: Journal) -> None:
    """The check above can fail: an unindexed filter is reported."""
    plans = explained(journal, lambda: journal.db.execute("SELECT * FROM tasks WHERE tool = 't'").fetchall())
    assert full_scans(plans)


def test_the_listing_indexes_are_a_migration_of_their_own(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    indexes = {r[0] for r in journal.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_tasks_status_task_id", "idx_tasks_server_task_id", "idx_tasks_finished_at"} <= indexes
    names = [r[0] for r in sqlite3.connect(tmp_path / "j.db").execute("SELECT name FROM _sqlite_migrations")]
    assert "m005_listing_indexes" in names


def test_past_a_thousand_the_count_says_at_least(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("emceepee_cli.store.pages.MORE_COUNTED", 5)
    add_tasks(journal, 12)
    first = journal.tasks.page(TaskFilter(include_finished=True), None, 3)
    assert (first.get("more"), first.get("more_at_least")) == (5, True)
    last = journal.tasks.page(TaskFilter(include_finished=True), first["next_cursor"], 4)
    assert (last.get("more"), last.get("more_at_least")) == (5, None)
