"""Resume tokens through a real `emceepee serve`: a backend's (handed to the model, or followed by
emceepee, also across a kill -9 of serve) and emceepee's own for a task (signed; forgeries refused)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import paths, seal
from emceepee_cli.calls import resume
from emceepee_cli.questions import sagas
from tests.e2e.test_chains import block, call, started
from tests.support import (
    Gate,
    RawHost,
    example_table,
    hostile_table,
    payload,
    run_cli,
    serve_command,
    serving,
    still_answering,
    texts,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "resumable.log"


def config_for(tmp_path: Path, record: Path, **extra: Any) -> Path:
    """resumable and hostile."""
    env = {"EMCEEPEE_EXAMPLE_LOG": str(record)}
    return write_config(
        tmp_path / "config.toml",
        example_table("resumable", "resumable.py", env=env, **extra),
        hostile_table("hostile", auto_resume=True, auto_resume_limit=3, auto_resume_interval_ms=1),
    )


def calls(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


async def test_a_partial_result_shows_its_token_and_the_model_resumes_page_by_page(
    tmp_path: Path, record: Path
) -> None:
    async with serving(config_for(tmp_path, record)) as client:
        with anyio.fail_after(30):
            await started(client)
            pages = [await call(client, "resumable", "search", {"query": "p"})]
            while (more := block(pages[-1], "resumable")) is not None:
                assert len(pages) < 5, "the pages never end"
                pages.append(
                    await call(
                        client, "resumable", "search", {"query": "p"}, resume_token=more["resume_token"]
                    )
                )
    assert [texts(p)[0].split(":")[0] for p in pages] == [
        'page 1 of 3 for "p"',
        'page 2 of 3 for "p"',
        'page 3 of 3 for "p"',
    ]
    how = block(pages[0], "resumable")["how"]
    assert how.startswith(
        "execute_tool(server='resumable', tool='search', args={\"query\":\"p\"}, resume_token="
    )
    assert [line.rpartition(" ")[2] for line in calls(record)] == [
        "resume=none",
        "resume=params+meta+arguments",
        "resume=params+meta+arguments",
    ]


async def test_auto_resume_returns_the_last_result_with_a_count_and_keeps_the_earlier_ones(
    tmp_path: Path, record: Path
) -> None:
    async with serving(config_for(tmp_path, record, auto_resume_interval_ms=1)) as client:
        with anyio.fail_after(30):
            await started(client)
            done = await call(client, "resumable", "job", {"name": "j", "polls": 3}, auto_resume=True)
            earlier = block(done, "earlier_results")
            task = payload(await client.call_tool("get_task", {"task_id": earlier["task_id"]}))
    assert texts(done)[0] == "job j: ready after 3 polls"
    assert block(done, "resumed") == {"count": 3, "complete": True} and block(done, "resumable") is None
    assert [s["result"]["content"][0]["text"] for s in task["steps"]] == [
        "job j: not ready (poll 0 of 3)",
        "job j: not ready (poll 1 of 3)",
        "job j: not ready (poll 2 of 3)",
        "job j: ready after 3 polls",
    ]
    assert len(calls(record)) == 4


async def test_a_token_that_never_ends_stops_at_the_limit_and_is_shown(tmp_path: Path, record: Path) -> None:
    async with serving(config_for(tmp_path, record)) as client:
        with anyio.fail_after(30):
            await started(client)
            last = await call(client, "hostile", "endless", {})
            await still_answering(client)
    assert texts(last)[0] == "again 4"  # the first call, then auto_resume_limit = 3 re-issues
    assert block(last, "resumed") == {"count": 3, "complete": False, "why": "auto_resume_limit (3) reached"}
    assert block(last, "resumable")["resume_token"] == "t4"


async def wait_for_calls(record: Path, count: int) -> None:
    while len(calls(record)) < count:  # noqa: ASYNC110 - the backend process writes it; nothing can wake us
        await anyio.sleep(0.05)


async def killed_while_resuming(config: Path, record: Path, args: dict[str, Any]) -> dict[str, Any]:
    """Start the auto-resumed job in a serve, kill -9 that serve mid-resume; the job's promotion."""
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(30):
            await host.initialize()
            await host.tool("list_servers", {})
            promoted = await host.tool(
                "execute_tool", {"server": "resumable", "tool": "job", "args": args, "timeout_ms": 100}
            )
            await wait_for_calls(record, 3)
        process.kill()
        with anyio.fail_after(20):
            await process.wait()
    finally:
        await process.aclose()
    return promoted


async def test_an_auto_resumed_task_survives_kill_9_of_serve_and_is_finished_by_the_next(
    tmp_path: Path, record: Path
) -> None:
    config = config_for(tmp_path, record, auto_resume=True, auto_resume_interval_ms=1)
    promoted = await killed_while_resuming(config, record, {"name": "k", "polls": 6, "seconds": 0.3})
    task_id = promoted["proxy_task"]["task_id"]
    async with serving(config) as second:
        with anyio.fail_after(60):
            await second.call_tool("list_servers", {})
            done = await second.call_tool("get_task_result", {"task_id": task_id, "timeout_ms": 40_000})
            task = payload(await second.call_tool("get_task", {"task_id": task_id}))
    assert texts(done)[0] == "job k: ready after 6 polls"
    assert task["task"]["status"] == "completed"
    polls = [s["result"]["structuredContent"]["poll"] for s in task["steps"] if s["result"]]
    assert polls[-1] == 6 and sorted(set(polls)) == list(range(7))  # nothing lost, at most one repeated


async def test_a_resuming_task_whose_server_was_removed_keeps_its_token_until_the_server_is_back(
    tmp_path: Path, record: Path
) -> None:
    config = config_for(tmp_path, record, auto_resume=True, auto_resume_interval_ms=1)
    args = {"name": "r", "polls": 6, "seconds": 0.3}
    task_id = (await killed_while_resuming(config, record, args))["proxy_task"]["task_id"]
    full = config.read_text()
    write_config(config, hostile_table("hostile"))  # the user removed the server meanwhile
    async with serving(config) as without:
        with anyio.fail_after(60):
            await without.call_tool("list_servers", {})
            ended = await without.call_tool("get_task_result", {"task_id": task_id, "timeout_ms": 20_000})
            task = payload(await without.call_tool("get_task", {"task_id": task_id}))["task"]
    shown = run_cli("tasks", "show", task_id[:12], "--json")  # a person hands the token on from the CLI
    token = json.loads(shown.stdout)["task"]["resume_token"]
    readable = run_cli("tasks", "show", task_id)
    config.write_text(full)  # and put it back
    async with serving(config) as back:
        with anyio.fail_after(60):
            await back.call_tool("list_servers", {})
            again = {"server": "resumable", "tool": "job", "args": args, "resume_token": token}
            done = await back.call_tool("execute_tool", {**again, "timeout_ms": 40_000})
    assert ended.is_error and "Its resume token is kept" in texts(ended)[0]
    assert task["status"] == "interrupted" and task["resume_token"].startswith(resume.PREFIX)
    assert token == task["resume_token"] and f"resume token: {token}" in readable.stdout
    assert texts(done)[0] == "job r: ready after 6 polls"


async def test_a_tasks_own_resume_token_gets_its_result_and_forgeries_are_refused(
    tmp_path: Path, record: Path
) -> None:
    config = config_for(tmp_path, record)
    gate = Gate(tmp_path / "gate")
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process)
        with anyio.fail_after(40):
            await host.initialize()
            await host.tool("list_servers", {})
            slow: dict[str, Any] = {"server": "hostile", "tool": "gated", "args": gate.args("done")}
            raw = await host.send(
                "tools/call", {"name": "execute_tool", "arguments": {**slow, "timeout_ms": 0}}
            )
            token = raw["structuredContent"]["proxy_task"]["resume_token"]
            task_id = raw["structuredContent"]["proxy_task"]["task_id"]
            gate.open()
            done = await host.send(
                "tools/call", {"name": "execute_tool", "arguments": slow, "resumeToken": token}
            )
            key = seal.install_key()
            body = token.removeprefix(resume.PREFIX)
            forged = {
                "tampered": resume.PREFIX + body[:-3] + ("AAA" if body[-3:] != "AAA" else "BBB"),
                "foreign": seal.sign_resume(
                    b"k" * 32, task_id, "hostile", "gated", slow["args"], time.time() + 60
                ),
                "expired": seal.sign_resume(key, task_id, "hostile", "gated", slow["args"], time.time() - 1),
                "saga": sagas.sign(key, task_id, []),
                "other call": seal.sign_resume(
                    key, task_id, "hostile", "gated", gate.args("other"), time.time() + 60
                ),
            }
            refused = {
                name: await host.tool("execute_tool", {**slow, "resume_token": value})
                for name, value in forged.items()
            }
    finally:
        if process.stdin is not None:
            await process.stdin.aclose()  # serve stops its backends on EOF
        with anyio.fail_after(20):
            await process.wait()
        await process.aclose()
    assert raw["nextResumeToken"] == token and token.startswith("emp1.")
    assert done["content"][0]["text"] == "done" and "nextResumeToken" not in done
    messages = {name: result["error"]["message"] for name, result in refused.items()}
    assert "did not issue it, or it was altered" in messages["tampered"]
    assert "did not issue it, or it was altered" in messages["foreign"]
    assert "expired at" in messages["expired"]
    assert "This is a saga_token" in messages["saga"]
    assert f"belongs to task {task_id}" in messages["other call"]


async def test_a_serve_whose_install_key_cannot_be_used_still_serves_and_signs_with_a_key_of_its_own(
    tmp_path: Path,
) -> None:
    (paths.data_dir() / seal.KEY_FILE).mkdir(parents=True)  # where the key file should be: a folder
    config = write_config(tmp_path / "config.toml", hostile_table("hostile"))
    gate = Gate(tmp_path / "gate")
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            slow = {"server": "hostile", "tool": "gated", "args": gate.args("done")}
            started = payload(await client.call_tool("execute_tool", {**slow, "timeout_ms": 0}))
            token = started["proxy_task"]["resume_token"]
            gate.open()
            done = await client.call_tool(
                "execute_tool", {**slow, "resume_token": token, "timeout_ms": 20_000}
            )
    assert token.startswith(resume.PREFIX) and texts(done) == ["done"]
