"""The journal outlives `serve`: kill -9 and restart, two hosts on one journal, the CLI's cancel."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from tests.support import (
    Gate,
    RawHost,
    example_table,
    hostile_table,
    payload,
    run_cli,
    serve_command,
    serving,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


@pytest.fixture
def config(tmp_path: Path, record: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("echo", "echo.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
        hostile_table("h"),  # for its gates
    )


async def test_after_kill_9_a_new_serve_reports_the_lost_task_and_keeps_finished_results(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(30):
            await host.initialize()
            done = await host.tool(
                "execute_tool",
                {"server": "h", "tool": "gated", "args": gate.args("finished"), "timeout_ms": 10},
            )
            gate.open()
            await host.tool("get_task_result", {"task_id": done["proxy_task"]["task_id"]})
            lost = await host.tool(
                "execute_tool",
                {"server": "echo", "tool": "slow", "args": {"seconds": 60, "steps": 1}, "timeout_ms": 10},
            )
        process.kill()
        with anyio.fail_after(10):
            await process.wait()
    finally:
        await process.aclose()
    async with serving(config) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("get_task_result", {"task_id": done["proxy_task"]["task_id"]})
            task = payload(await client.call_tool("get_task", {"task_id": lost["proxy_task"]["task_id"]}))[
                "task"
            ]
            interrupted = await client.call_tool(
                "get_task_result", {"task_id": lost["proxy_task"]["task_id"]}
            )
    assert texts(result) == ["finished"]
    assert task["status"] == "interrupted"
    assert (
        "emceepee stopped while this call was running" in task["error"]
        and "the backend call was lost" in task["error"]
    )
    assert interrupted.is_error and "interrupted" in texts(interrupted)[0]
    shown = json.loads(run_cli("tasks", "show", lost["proxy_task"]["task_id"][:12], "--json").stdout)
    assert shown == {"task": task}


async def test_two_serves_share_a_journal_and_the_cli_cancel_reaches_the_owner(
    config: Path, record: Path
) -> None:
    async with serving(config) as owner, serving(config) as other:
        with anyio.fail_after(30):
            # as hosts do, list first: a call to a backend still starting would say so in its status
            await until_ready(owner, "echo")
            await until_ready(other, "echo")
            mine = payload(
                await owner.call_tool(
                    "execute_tool",
                    {"server": "echo", "tool": "slow", "args": {"seconds": 60, "steps": 1}, "timeout_ms": 10},
                )
            )
            theirs = payload(
                await other.call_tool(
                    "execute_tool",
                    {"server": "echo", "tool": "slow", "args": {"seconds": 60, "steps": 1}, "timeout_ms": 10},
                )
            )
            task_id = mine["proxy_task"]["task_id"]
            listed = json.loads(run_cli("tasks", "list", "--json").stdout)
            cancelled = run_cli("tasks", "cancel", task_id[:14])
            # the owner notices the journal change within a second and cancels its backend call
            result = await owner.call_tool("get_task_result", {"task_id": task_id, "timeout_ms": 5000})
            still = payload(await other.call_tool("get_task", {"task_id": theirs["proxy_task"]["task_id"]}))[
                "task"
            ]
            from_other = await other.call_tool("get_task_result", {"task_id": task_id})
            await other.call_tool("cancel_task", {"task_id": theirs["proxy_task"]["task_id"]})
    assert {t["task_id"] for t in listed["tasks"]} == {task_id, theirs["proxy_task"]["task_id"]}
    [listed_mine] = [t for t in listed["tasks"] if t["task_id"] == task_id]  # newest first: theirs leads
    # one task shown to the host carries its resume token; a listing (here the CLI's) does not
    shown = {k: v for k, v in mine["proxy_task"].items() if k != "resume_token"}
    assert mine["proxy_task"]["resume_token"].startswith("emp1.")
    assert listed_mine == shown | {"last_updated_at": listed_mine["last_updated_at"]}
    assert cancelled.returncode == 0, cancelled.stderr
    assert result.is_error and "cancelled" in texts(result)[0]
    assert still["status"] == "working"
    assert from_other.is_error and "cancelled" in texts(from_other)[0]


async def test_a_modern_call_suspended_on_input_survives_kill_9_and_completes_after_restart(
    tmp_path: Path, record: Path
) -> None:
    config = write_config(
        tmp_path / "config.toml",
        example_table("modern", "modern.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}, protocol="modern"),
    )
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(30):
            await host.initialize()
            first = await host.tool(
                "execute_tool", {"server": "modern", "tool": "book", "args": {"city": "Oslo"}}
            )
        process.kill()
        with anyio.fail_after(10):
            await process.wait()
    finally:
        await process.aclose()
    task_id = first["proxy_task"]["task_id"]
    [step] = first["saga"]["steps"]
    async with serving(config) as client:
        with anyio.fail_after(30):
            adopted = payload(await client.call_tool("get_task", {"task_id": task_id}))
            await client.call_tool(
                "respond_to_elicitation",
                {"request_id": step["step_id"], "action": "accept", "content": {"date": "2026-12-24"}},
            )
            second = payload(await client.call_tool("get_task_result", {"task_id": task_id}))
            [hotel] = second["saga"]["steps"]
            await client.call_tool(
                "respond_to_sampling", {"request_id": hotel["step_id"], "content": "Hotel Bristol"}
            )
            done = await client.call_tool("get_task_result", {"task_id": task_id})
    assert adopted["task"]["status"] == "working"
    assert [s["step_id"] for s in adopted["saga"]["steps"]] == [step["step_id"]]
    assert texts(done) == ["booked Hotel Bristol in Oslo on 2026-12-24"]
