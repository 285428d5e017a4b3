"""The journal under faults, with real `serve` processes and the real CLI: a frozen serve, serves
started together, two serves adopting one call, the file deleted under a running serve, a full disk."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from emceepee_cli.clock import now_iso
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.tables.instances import STALE_ENV
from tests.support import Gate, RawHost, example_table, hostile_table, run_cli, serve_command, write_config

pytestmark = pytest.mark.anyio

STOP_S = 20.0
# Runs `serve` with a small file-size limit: a disk that fills up, without root or a mounted image.
# SIGXFSZ is ignored (as Python does anyway), so a write past the limit fails with EFBIG instead.
FILE_SIZE_LIMITED = (
    "import os, resource, signal, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); os.execv(sys.argv[2], sys.argv[2:])"
)


@dataclass
class Run:
    """A real `serve` process, its host, and what it wrote to stderr."""

    process: anyio.abc.Process
    host: RawHost
    stderr: bytearray = field(default_factory=bytearray)

    async def stop(self) -> int:
        """Close stdin as a host does; serve must exit by itself, within a bound."""
        if self.process.returncode is None:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
            with anyio.fail_after(STOP_S):
                await self.process.wait()
        assert self.process.returncode is not None
        return self.process.returncode

    @property
    def log(self) -> str:
        return self.stderr.decode(errors="replace")


@asynccontextmanager
async def serve(
    config: Path, env: dict[str, str] | None = None, command: list[str] | None = None
) -> AsyncIterator[Run]:
    process = await anyio.open_process(command or serve_command(config), env=env or {**os.environ})
    run = Run(process, RawHost(process))

    async def drain() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            run.stderr += chunk

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            try:
                yield run
            finally:
                with anyio.CancelScope(shield=True):
                    if process.returncode is None:
                        with anyio.move_on_after(STOP_S):
                            await run.stop()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
    finally:
        await process.aclose()


def gated(gate: Gate, text: str = "done") -> dict[str, Any]:
    """h.gated, promoted at once: it runs until the test opens `gate`, then answers `text`."""
    return {"server": "h", "tool": "gated", "args": gate.args(text), "timeout_ms": 10}


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", hostile_table("h"))


async def start(run: Run) -> None:
    await run.host.initialize()
    await run.host.tool("list_servers", {})


def task_of(task_id: str) -> dict[str, Any]:
    shown = run_cli("tasks", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    task: dict[str, Any] = json.loads(shown.stdout)["task"]
    return task


async def test_a_frozen_serve_is_not_declared_dead_and_its_task_keeps_its_real_result(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    env = {**os.environ, STALE_ENV: "1"}  # stale after 1 s (heartbeat every ~0.2 s), not 30
    async with serve(config, env) as run:
        with anyio.fail_after(30):
            await start(run)
            task_id = (await run.host.tool("execute_tool", gated(gate)))["proxy_task"]["task_id"]
        os.kill(run.process.pid, signal.SIGSTOP)
        try:
            await anyio.sleep(2.5)  # the fault itself: frozen for longer than the staleness threshold
            listed = run_cli("tasks", "list", "--json", env=env)
            frozen = task_of(task_id)
        finally:
            os.kill(run.process.pid, signal.SIGCONT)
        gate.open()
        with anyio.fail_after(30):
            result = await run.host.tool("get_task_result", {"task_id": task_id, "timeout_ms": 20000})
            await run.host.tool("list_servers", {})  # still answering
        assert await run.stop() == 0
    assert listed.returncode == 0, listed.stderr
    assert [t["status"] for t in json.loads(listed.stdout)["tasks"]] == ["working"]
    assert frozen["status"] == "working"
    assert result["content"][0]["text"] == "done" and not result.get("is_error")
    assert task_of(task_id)["status"] == "completed"


async def test_a_serve_takes_back_a_task_an_older_emceepee_marked_interrupted_and_delivers_it(
    config: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    async with serve(config) as run:
        with anyio.fail_after(30):
            await start(run)
            task_id = (await run.host.tool("execute_tool", gated(gate)))["proxy_task"]["task_id"]
            # what an older emceepee (or a CLI on another machine) writes when it takes serve for dead
            old = f"emceepee stopped while this call was running (at {now_iso(-60)}, pid {run.process.pid})"
            with sqlite3.connect(Journal().path) as db:
                db.execute(
                    "UPDATE tasks SET status = 'interrupted', finished_at = ?, error = ? WHERE task_id = ?",
                    [now_iso(), f"{old}; the backend call was lost", task_id],
                )
            while "working again" not in run.log:  # noqa: ASYNC110 - serve's watcher takes it back
                await anyio.sleep(0.05)
            gate.open()  # the call ends only once serve has taken it back
            result = await run.host.tool("get_task_result", {"task_id": task_id, "timeout_ms": 20000})
            await run.host.tool("list_servers", {})
        assert await run.stop() == 0
    assert result["content"][0]["text"] == "done" and not result.get("is_error")
    assert task_of(task_id)["status"] == "completed"
    assert "working again" in run.log and task_id in run.log


async def test_serves_and_cli_commands_started_together_on_a_fresh_journal_all_come_up(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", "")
    env = {**os.environ}
    assert not (Path(env["EMCEEPEE_HOME"]) / "data" / "journal.db").exists()
    cli = [
        await anyio.open_process([sys.executable, "-m", "emceepee_cli", *args], env=env)
        for args in (("tasks", "list", "--json"), ("pending", "--json"))
    ]
    async with serve(config) as a, serve(config) as b, serve(config) as c:
        with anyio.fail_after(60):
            for run in (a, b, c):
                await start(run)
                assert await run.host.tool("list_servers", {}) == {"servers": []}
            codes = [await process.wait() for process in cli]
        for run in (a, b, c):
            assert await run.stop() == 0, run.log
            assert "locked" not in run.log
    for process in cli:
        await process.aclose()
    assert codes == [0, 0]
    assert len(list(Journal().db["instances"].rows)) == 3


async def test_two_serves_started_after_kill_9_re_drive_a_suspended_call_once(
    tmp_path: Path, record: Path
) -> None:
    config = write_config(
        tmp_path / "config.toml",
        example_table("modern", "modern.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}, protocol="modern"),
    )
    async with serve(config) as owner:
        with anyio.fail_after(30):
            await owner.host.initialize()
            first = await owner.host.tool(
                "execute_tool", {"server": "modern", "tool": "book", "args": {"city": "Oslo"}}
            )
        owner.process.kill()
        with anyio.fail_after(10):
            await owner.process.wait()
    task_id = first["proxy_task"]["task_id"]
    [step] = first["saga"]["steps"]
    async with serve(config) as a, serve(config) as b:
        with anyio.fail_after(60):
            await start(a)
            await start(b)
            answered = run_cli("answer", step["step_id"], "--content", '{"date": "2026-12-24"}')
            assert answered.returncode == 0, answered.stderr
            seen = [
                await run.host.tool("get_task_result", {"task_id": task_id, "timeout_ms": 15000})
                for run in (a, b)
            ]
            [(claimer, second)] = [(run, out) for run, out in zip((a, b), seen, strict=True) if "saga" in out]
            [hotel] = second["saga"]["steps"]
            await claimer.host.tool(
                "respond_to_sampling", {"request_id": hotel["step_id"], "content": "Hotel Bristol"}
            )
            done = await claimer.host.tool("get_task_result", {"task_id": task_id, "timeout_ms": 15000})
            for run in (a, b):
                await run.host.tool("list_servers", {})
    lines = record.read_text().splitlines()
    answers = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("answer")]
    assert [answer.get("key") for answer in answers] == [
        "date",
        "hotel",
    ]  # each round re-driven by one serve only
    assert done["content"][0]["text"] == "booked Hotel Bristol in Oslo on 2026-12-24"
    assert task_of(task_id)["status"] == "completed"


async def test_a_journal_deleted_under_a_running_serve_is_re_created_and_keeps_what_comes_later(
    config: Path, tmp_path: Path
) -> None:
    early_gate, late_gate = Gate(tmp_path / "early"), Gate(tmp_path / "late")
    db = Journal().path
    async with serve(config) as run:
        with anyio.fail_after(30):
            await start(run)
            early = (await run.host.tool("execute_tool", gated(early_gate, "early")))["proxy_task"]["task_id"]
            early_gate.open()
            await run.host.tool("get_task_result", {"task_id": early, "timeout_ms": 10000})
            late = (await run.host.tool("execute_tool", gated(late_gate, "late")))["proxy_task"]["task_id"]
        db.unlink()
        with anyio.fail_after(30):
            while not db.exists():  # noqa: ASYNC110 - another process re-creates it; nothing here can wake us
                await anyio.sleep(0.05)
            listed = json.loads(run_cli("tasks", "list", "--all", "--json").stdout)["tasks"]
            late_gate.open()
            result = await run.host.tool("get_task_result", {"task_id": late, "timeout_ms": 20000})
            await run.host.tool("list_servers", {})
        assert await run.stop() == 0
    assert [t["task_id"] for t in listed] == [late, early]  # re-journaled once the file is back
    assert result["content"][0]["text"] == "late"
    assert "was deleted or replaced" in run.log
    kept = run_cli("tasks", "result", late)
    assert kept.returncode == 0 and kept.stdout.strip() == "late"
    assert task_of(early)["status"] == "completed"  # this process's earlier result is kept too


async def test_a_full_disk_is_reported_clearly_and_serve_keeps_answering_and_exits_cleanly(
    config: Path, tmp_path: Path
) -> None:
    held, quick_gate = Gate(tmp_path / "never"), Gate(tmp_path / "quick")
    Journal().close()  # the journal exists before the limit applies: the disk fills up later
    limit = os.path.getsize(Journal().path) + 64 * 1024
    command = [sys.executable, "-c", FILE_SIZE_LIMITED, str(limit), *serve_command(config)]
    async with serve(config, command=command) as run:
        with anyio.fail_after(60):
            await start(run)
            for _ in range(100):  # every promoted call journals a task; soon one cannot be written
                out = await run.host.tool("execute_tool", gated(held))
                if "journal_error" in out:
                    break
            assert await run.host.tool("list_servers", {}) != {}  # still answering
            # the task the journal could not take is still known to this serve, and so is a result
            shown = await run.host.tool("get_task", {"task_id": out["proxy_task"]["task_id"]})
            quick = await run.host.tool("execute_tool", gated(quick_gate, "quick"))
            quick_gate.open()
            kept = await run.host.send(
                "tools/call",
                {"name": "get_task_result", "arguments": {"task_id": quick["proxy_task"]["task_id"]}},
            )
        code = await run.stop()
    error = out["journal_error"]
    assert error["type"] == "JournalError" and "could not be written" in error["message"]
    assert str(Journal().path) in error["message"] and "free space" in error["hint"]
    assert "a restart would lose it" in error["hint"]
    assert shown["task"]["status"] == "working"
    assert "journal_error" in quick and kept["content"][0]["text"] == "quick", kept
    assert code == 0, run.log
    assert "could not record that this emceepee stopped" in run.log
    assert "Traceback" not in run.log and "ExceptionGroup" not in run.log
