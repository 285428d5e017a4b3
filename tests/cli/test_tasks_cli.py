"""`emceepee tasks …` on a real journal file, run in-process."""

from __future__ import annotations

import json

import pytest

from emceepee_cli.clock import now_iso
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskStatus
from tests.cli.inproc import cli


@pytest.fixture
def journal() -> Journal:
    journal = Journal()
    journal.register_instance("01INSTANCE")
    for task_id, tool in (("01AAAWORKING00000000000000", "slow"), ("01BBBDONE00000000000000000", "echo")):
        at = now_iso()
        journal.insert_task(
            {
                "task_id": task_id,
                "instance_id": "01INSTANCE",
                "server": "echo",
                "tool": tool,
                "args": {},
                "status": "working",
                "created_at": at,
                "last_updated_at": at,
            }
        )
    result = {"content": [{"type": "text", "text": "the answer"}], "structuredContent": {"n": 42}}
    journal.finish_task("01BBBDONE00000000000000000", TaskStatus.COMPLETED, result=result)
    return journal


def test_tasks_list_shows_working_tasks_and_all_with_all(journal: Journal) -> None:
    working = json.loads(cli("tasks", "list", "--json").stdout)["tasks"]
    everything = json.loads(cli("tasks", "list", "--all", "--json").stdout)["tasks"]
    completed = json.loads(cli("tasks", "list", "--status", "completed", "--json").stdout)["tasks"]
    table = cli("tasks", "list").stdout
    assert [t["task_id"] for t in working] == ["01AAAWORKING00000000000000"]
    assert [t["status"] for t in everything] == ["completed", "working"]  # newest first
    assert [t["tool"] for t in completed] == ["echo"]
    assert set(working[0]) == {"task_id", "status", "server", "tool", "created_at", "last_updated_at"}
    assert "01AAAWORKING00000000000000" in table and "slow" in table


def test_tasks_result_prints_the_backends_result(journal: Journal) -> None:
    plain = cli("tasks", "result", "01bbb")
    as_json = json.loads(cli("tasks", "result", "01BBB", "--json").stdout)
    working = cli("tasks", "result", "01AAA")
    assert plain.returncode == 0 and plain.stdout.strip() == "the answer"
    assert as_json["structuredContent"] == {"n": 42}
    assert working.returncode == 2 and "still working" in working.stderr


def test_tasks_cancel_marks_the_request_and_refuses_finished_tasks(journal: Journal) -> None:
    asked = cli("tasks", "cancel", "01AAA")
    finished = cli("tasks", "cancel", "01BBB")
    assert asked.returncode == 0 and "Asked the emceepee process" in asked.stdout
    assert journal.cancel_requests("01INSTANCE") == ["01AAAWORKING00000000000000"]
    assert finished.returncode == 2 and "already completed" in finished.stderr


def test_an_ambiguous_or_unknown_prefix_is_a_clear_error(journal: Journal) -> None:
    ambiguous = cli("tasks", "show", "01")
    unknown = cli("tasks", "show", "99")
    bad_status = cli("tasks", "list", "--status", "done")
    assert ambiguous.returncode == 2 and "matches 2 tasks" in ambiguous.stderr
    assert unknown.returncode == 2 and "emceepee tasks list --all" in unknown.stderr
    assert bad_status.returncode == 2 and "working, completed" in bad_status.stderr
