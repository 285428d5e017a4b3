"""A long task history, paged: the host's list_tasks and the CLI's `tasks list` hand out a page and
a cursor to the next one, through the real `serve` process and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from emceepee_cli.clock import now_iso
from emceepee_cli.ids import new_id
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskStatus
from tests.cli.inproc import cli
from tests.support import as_task_row, payload, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio


def history(count: int) -> list[str]:
    """`count` finished tasks of an emceepee that has stopped, in this test's journal; their ids."""
    journal = Journal()
    journal.instances.register("01EARLIERSERVE")
    ids = []
    for n in range(count):
        task_id, at = new_id(), now_iso()
        journal.tasks.insert(
            as_task_row(
                {
                    "task_id": task_id,
                    "instance_id": "01EARLIERSERVE",
                    "server": "echo",
                    "tool": f"tool{n}",
                    "args": "{}",
                    "status": "working",
                    "created_at": at,
                    "last_updated_at": at,
                }
            )
        )
        journal.tasks.finish(task_id, TaskStatus.COMPLETED, result={"content": []})
        ids.append(task_id)
    journal.instances.stop("01EARLIERSERVE")
    journal.close()
    return ids


async def test_a_host_pages_through_the_task_history_with_the_cursor(tmp_path: Path) -> None:
    ids = history(7)
    config = write_config(tmp_path / "config.toml", "")
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            pages = [payload(await client.call_tool("list_tasks", {"include_completed": True, "limit": 3}))]
            while "next_cursor" in pages[-1]:
                args = {"include_completed": True, "limit": 3, "cursor": pages[-1]["next_cursor"]}
                pages.append(payload(await client.call_tool("list_tasks", args)))
            garbage = await client.call_tool("list_tasks", {"include_completed": True, "cursor": "garbage"})
            other = await client.call_tool(
                "list_tasks", {"server": "echo", "cursor": pages[0]["next_cursor"]}
            )
            await still_answering(client)
    assert [t["task_id"] for p in pages for t in p["tasks"]] == ids[::-1]
    assert [p.get("more") for p in pages] == [4, 1, None]
    assert garbage.is_error and "The cursor 'garbage' is not one a task listing gave" in texts(garbage)[0]
    assert other.is_error and "other filters" in texts(other)[0]


def test_the_cli_pages_and_says_how_to_get_the_next_page() -> None:
    ids = history(5)
    first = cli("tasks", "list", "--all", "--limit", "2")
    assert first.returncode == 0 and ids[-1] in first.stdout and ids[0] not in first.stdout
    footer = first.stdout.strip().splitlines()[-1]
    assert footer.startswith("3 more; next page: emceepee tasks list --all --limit 2 --cursor ")
    second = cli(*footer.split("emceepee ", 1)[1].split(), "--json")
    assert [t["task_id"] for t in json.loads(second.stdout)["tasks"]] == ids[2:0:-1]
    bad = cli("tasks", "list", "--all", "--cursor", "made-up")
    assert bad.returncode == 2 and "is not one a task listing gave" in bad.stderr
