"""`emceepee tasks …` on a real journal file, run in-process."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli import paths
from emceepee_cli.clock import now_iso
from emceepee_cli.seal import KEY_FILE
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskStatus
from tests.cli.inproc import cli
from tests.support import as_task_row


@pytest.fixture
def journal() -> Journal:
    journal = Journal()
    journal.instances.register("01INSTANCE")
    for task_id, tool in (("01AAAWORKING00000000000000", "slow"), ("01BBBDONE00000000000000000", "echo")):
        at = now_iso()
        journal.tasks.insert(
            as_task_row(
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
        )
    result = {"content": [{"type": "text", "text": "the answer"}], "structuredContent": {"n": 42}}
    journal.tasks.finish("01BBBDONE00000000000000000", TaskStatus.COMPLETED, result=result)
    return journal


def test_tasks_list_shows_working_tasks_and_all_with_all(journal: Journal) -> None:
    """(Interrupted ones are shown by default too: test_interrupted_tasks_are_listed_by_default.)"""
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
    assert plain.returncode == 0 and plain.stdout == 'the answer\n{\n  "n": 42\n}\n'
    assert as_json["structuredContent"] == {"n": 42}
    assert working.returncode == 5 and "still working" in working.stderr


META_TOOLS = re.compile(
    r"\b(list_tools|list_servers|get_logs|get_task|execute_tool|list_tasks|resume_tool)\b"
)


def _ended(
    journal: Journal,
    task_id: str,
    status: TaskStatus,
    result: dict[str, Any] | None = None,
    resume_token: str | None = None,
) -> None:
    at = now_iso()
    row = {"task_id": task_id, "instance_id": "01INSTANCE", "server": "echo", "tool": "slow", "args": {}}
    journal.tasks.insert(as_task_row({**row, "status": "working", "created_at": at, "last_updated_at": at}))
    if resume_token is not None:
        journal.tasks.set_resume(task_id, resume_token, auto=False)
    journal.tasks.finish(task_id, status, error=None if result else f"it {status}", result=result)


@pytest.mark.parametrize(
    ("status", "code", "hint"),
    [
        (TaskStatus.FAILED, 3, "emceepee logs echo"),
        (TaskStatus.CANCELLED, 6, "cancelled on request"),
        (TaskStatus.EXPIRED, 7, "task_ttl_ms"),
        (TaskStatus.INTERRUPTED, 8, "the result of the lost call is unknown"),
    ],
)
def test_tasks_result_exits_with_a_code_of_its_own_for_each_way_a_task_ends_without_a_result(
    journal: Journal, status: TaskStatus, code: int, hint: str
) -> None:
    _ended(journal, "01EEEENDED0000000000000000", status)
    ended = cli("tasks", "result", "01EEE")
    assert ended.returncode == code, ended
    assert f"(echo.slow) {status}: it {status}" in ended.stderr and hint in ended.stderr
    assert not META_TOOLS.search(ended.stderr), ended.stderr  # a person is told commands, not meta-tools


def test_tasks_result_of_an_interrupted_resumable_task_points_at_its_resume_token(journal: Journal) -> None:
    _ended(journal, "01FFFRESUMABLE000000000000", TaskStatus.INTERRUPTED, resume_token="backend-token")
    ended = cli("tasks", "result", "01FFF")
    assert ended.returncode == 8 and "emceepee tasks show 01FFFRESUMABLE000000000000" in ended.stderr
    assert not META_TOOLS.search(ended.stderr), ended.stderr


def test_tasks_result_of_a_tool_error_prints_it_and_exits_3(journal: Journal) -> None:
    failed = {"content": [{"type": "text", "text": "no such file"}], "isError": True}
    _ended(journal, "01GGGTOOLERROR000000000000", TaskStatus.COMPLETED, result=failed)
    plain = cli("tasks", "result", "01GGG")
    as_json = cli("tasks", "result", "01GGG", "--json")
    assert (
        plain.returncode == 3
        and plain.stdout == "no such file\n"
        and "answered with an error" in plain.stderr
    )
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["isError"] is True


def test_tasks_cancel_marks_the_request_and_refuses_finished_tasks(journal: Journal) -> None:
    asked = cli("tasks", "cancel", "01AAA")
    finished = cli("tasks", "cancel", "01BBB")
    assert asked.returncode == 0 and "Asked the emceepee process" in asked.stdout
    assert journal.tasks.cancel_requests("01INSTANCE") == ["01AAAWORKING00000000000000"]
    assert finished.returncode == 2 and "already completed" in finished.stderr


def test_an_ambiguous_or_unknown_prefix_is_a_clear_error(journal: Journal) -> None:
    ambiguous = cli("tasks", "show", "01")
    unknown = cli("tasks", "show", "99")
    bad_status = cli("tasks", "list", "--status", "done")
    assert ambiguous.returncode == 2 and "matches 2 tasks" in ambiguous.stderr
    assert unknown.returncode == 2 and "emceepee tasks list --all" in unknown.stderr
    assert bad_status.returncode == 2 and "working, completed" in bad_status.stderr


def test_interrupted_tasks_are_listed_by_default(journal: Journal) -> None:
    at = now_iso()
    journal.tasks.insert(
        as_task_row(
            {
                "task_id": "01CCCLOST00000000000000000",
                "instance_id": "01INSTANCE",
                "server": "echo",
                "tool": "slow",
                "args": {},
                "status": "working",
                "created_at": at,
                "last_updated_at": at,
            }
        )
    )
    lost = "emceepee stopped while this call was running (its emceepee process, pid 1, stopped)"
    journal.tasks.finish("01CCCLOST00000000000000000", TaskStatus.INTERRUPTED, error=lost)
    listed = json.loads(cli("tasks", "list", "--json").stdout)["tasks"]
    table = cli("tasks", "list").stdout
    assert [(t["task_id"][:5], t["status"]) for t in listed] == [
        ("01CCC", "interrupted"),
        ("01AAA", "working"),
    ]
    assert "01CCCLOST00000000000000000" in table and "interrupted" in table and "01BBB" not in table


def test_tasks_show_renders_the_task_and_its_result_as_text_not_python(journal: Journal) -> None:
    journal.tasks.update_progress("01AAAWORKING00000000000000", {"progress": 1.0, "total": 4.0}, "step one")
    working = cli("tasks", "show", "01AAA")
    done = cli("tasks", "show", "01BBB")
    as_json = json.loads(cli("tasks", "show", "01AAA", "--json").stdout)
    assert working.returncode == done.returncode == 0, working.stderr + done.stderr
    lines = working.stdout.splitlines()
    assert "task:         01AAAWORKING00000000000000" in lines and "call:         echo.slow" in lines
    assert "progress:     1/4" in lines and "message:      step one" in lines
    assert f"resume token: {as_json['task']['resume_token']}" in lines  # a working task's, as get_task's
    assert "resume token" not in done.stdout  # a completed task has its result instead
    assert "result:" in done.stdout.splitlines() and "  the answer" in done.stdout.splitlines()
    assert '    "n": 42' in done.stdout.splitlines()
    assert not any(mark in working.stdout + done.stdout for mark in ("{'", "None", "'progress'"))
    assert as_json["task"]["progress"] == {"progress": 1.0, "total": 4.0}


def test_tasks_show_without_a_readable_install_key_still_shows_the_task(journal: Journal) -> None:
    (paths.data_dir() / KEY_FILE).mkdir()  # where the key file should be, something unreadable
    shown = cli("tasks", "show", "01AAA")
    done = cli("tasks", "show", "01BBB")  # a task without a token does not look for the key at all
    assert shown.returncode == 0 and "task:" in shown.stdout and "resume token" not in shown.stdout
    assert "no resume token: The install key" in shown.stderr and "cannot be used" in shown.stderr
    assert done.returncode == 0 and done.stderr == ""


def test_an_image_in_a_result_is_described_by_show_and_saved_by_result(
    journal: Journal, tmp_path: Path
) -> None:
    at = now_iso()
    journal.tasks.insert(
        as_task_row(
            {
                "task_id": "01DDDIMAGE0000000000000000",
                "instance_id": "01INSTANCE",
                "server": "media",
                "tool": "picture",
                "args": {},
                "status": "working",
                "created_at": at,
                "last_updated_at": at,
            }
        )
    )
    image = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"\x89PNG-bytes").decode()}
    journal.tasks.finish("01DDDIMAGE0000000000000000", TaskStatus.COMPLETED, result={"content": [image]})
    shown = cli("tasks", "show", "01DDD")
    saved = cli("tasks", "result", "01DDD", "--out", str(tmp_path))
    assert "  [image image/png, 10 bytes, not saved: `emceepee tasks result` saves it]" in shown.stdout
    assert saved.stdout.strip() == f"[image image/png, saved to {tmp_path / 'picture-1.png'}]"
    assert (tmp_path / "picture-1.png").read_bytes() == b"\x89PNG-bytes"


def test_tasks_cancel_json_is_what_cancel_task_says_for_another_processs_task(journal: Journal) -> None:
    asked = json.loads(cli("tasks", "cancel", "01AAA", "--json").stdout)
    assert asked["cancel_requested"] is True and asked["task"]["task_id"] == "01AAAWORKING00000000000000"


def test_the_cli_pages_as_the_journal_does() -> None:
    from emceepee_cli.cli import tasks
    from emceepee_cli.store import pages

    assert (tasks.PAGE_SIZE, tasks.MAX_PAGE_SIZE) == (pages.PAGE_SIZE, pages.MAX_PAGE_SIZE)
