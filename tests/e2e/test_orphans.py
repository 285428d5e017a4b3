"""Nothing `serve` started outlives it, over the real `emceepee serve` process: a host that closes
stdin while an approval waits or while backends still start gets serve's exit within
`EXIT_BOUND_S`; a backend's grandchild that left its process group with setsid() and ignores
SIGTERM is stopped with serve, and after a `kill -9` of serve by the next CLI command or serve,
which find it in the journal (pid and start time: a reused pid is never touched).

Each test works as a host does first (initialize, list servers and tools, calls), then injects
the fault; the grandchild writes its pid to a file (tests/backends/hostile.py --setsid-child).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import pytest

from emceepee_cli import processes
from tests.e2e.test_backend_processes import STOP_BOUND_S, Serve, gone, kill_all, serve
from tests.support import hostile_table, run_cli, until, write_config

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not processes.HAVE_PROC, reason="needs /proc to follow processes by pid and start time"
    ),
]

EXIT_BOUND_S = 3.0  # from stdin's EOF to serve's exit, whatever is pending or starting


def journal_path(home: Path) -> Path:
    return home / "data" / "journal.db"


def spawned_rows(home: Path) -> list[tuple[str, int, int]]:
    """The journal's `spawned` rows (server, pid, start time), read as another process would."""
    with sqlite3.connect(f"file:{journal_path(home)}?mode=ro", uri=True, timeout=10) as db:
        return [tuple(r) for r in db.execute("SELECT server, pid, start_time FROM spawned")]


async def until_journaled(home: Path, proc: processes.Proc) -> None:
    """Wait (the caller bounds it) until serve has journaled `proc` as something it must stop."""
    await until(lambda: (proc.pid, proc.start) in {(pid, start) for _, pid, start in spawned_rows(home)})


async def until_written(path: Path) -> int:
    """The pid the setsid grandchild wrote (the caller bounds the wait)."""
    await until(lambda: path.exists() and bool(path.read_text().strip()))
    return int(path.read_text())


async def closed_and_timed(running: Serve) -> float:
    """Close serve's stdin as a host that goes away does; how long serve took to exit."""
    assert running.process.stdin is not None
    began = time.monotonic()
    await running.process.stdin.aclose()
    with anyio.fail_after(STOP_BOUND_S):  # the old code never exits here: fail, don't hang
        await running.process.wait()
    return time.monotonic() - began


@contextmanager
def cleaned_up(*found: processes.Proc) -> Iterator[None]:
    """Whatever the test's outcome, leave no process of its own behind."""
    try:
        yield
    finally:
        kill_all(set(found))


async def test_closing_stdin_while_an_approval_waits_exits_at_once(
    tmp_path: Path, emceepee_home: Path
) -> None:
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("guarded", confirm=["echo"]),
        hostile_table("plain"),
    )
    async with serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            assert await running.call("plain", "echo", text="first") == "first"
            pid = processes.identify(int(await running.call("guarded", "pid")))
            waiting = await running.host.tool(
                "execute_tool",
                {"server": "guarded", "tool": "echo", "args": {"text": "needs a person"}, "timeout_ms": 300},
            )
        with cleaned_up(pid):
            [question] = waiting["pending_client_action"]["elicitations"]
            assert waiting["proxy_task"]["status"] == "working"
            took = await closed_and_timed(running)
            with anyio.fail_after(STOP_BOUND_S):
                await gone(pid)
    print(f"stdin EOF with an approval pending: serve exited in {took:.2f} s")
    assert running.process.returncode == 0
    assert took <= EXIT_BOUND_S
    listed = run_cli("tasks", "list", "--json")  # the journal was released, and says how the call ended
    assert listed.returncode == 0, listed.stderr
    assert '"status": "interrupted"' in listed.stdout and "the host closed its connection" in listed.stdout
    assert question["request_id"] not in run_cli("pending", "--json").stdout


async def test_closing_stdin_while_an_add_server_approval_waits_exits_at_once(
    tmp_path: Path, emceepee_home: Path
) -> None:
    """The model's add_server waits for a person (its own job, not a call): closing stdin still
    ends serve at once, the change unmade and its question no longer pending."""
    config = write_config(tmp_path / "config.toml", hostile_table("plain"))
    async with serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            assert await running.call("plain", "echo", text="first") == "first"
            added = await running.host.tool(
                "add_server", {"name": "later", "command": "/bin/true", "persist": True, "timeout_ms": 10}
            )
        assert added["approval"]["status"] == "pending"
        took = await closed_and_timed(running)
    print(f"stdin EOF with an add_server approval pending: serve exited in {took:.2f} s")
    assert running.process.returncode == 0
    assert took <= EXIT_BOUND_S
    pending = run_cli("pending", "--json")
    assert pending.returncode == 0, pending.stderr
    assert added["approval"]["request_id"] not in pending.stdout
    assert "later" not in (tmp_path / "config.toml").read_text()


async def test_closing_stdin_during_start_up_stops_a_setsid_grandchild_in_time(
    tmp_path: Path, emceepee_home: Path
) -> None:
    escaped, go = tmp_path / "escaped.pid", tmp_path / "go"
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("escaper", "--start-when", str(go), "--setsid-child", str(escaped)),
        hostile_table("slow_one", "--start-when", str(go)),
        hostile_table("slow_two", "--start-when", str(go)),
    )
    async with serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            servers = await running.host.tool("list_servers", {})
        assert {row["status"] for row in servers["servers"]} == {"starting"}
        # The host goes away while the backends start; the escaper starts its grandchild only
        # then, and exits on stdin's EOF at once: the stop never sees the grandchild below it.
        assert running.process.stdin is not None
        began = time.monotonic()
        await running.process.stdin.aclose()
        go.write_text("")
        with anyio.fail_after(STOP_BOUND_S):
            await running.process.wait()
        took = time.monotonic() - began
        with anyio.fail_after(30):
            grandchild = processes.identify(await until_written(escaped))
    with cleaned_up(grandchild):
        with anyio.fail_after(STOP_BOUND_S):
            await gone(grandchild)
    print(
        f"stdin EOF with three backends starting, one with a setsid grandchild: serve exited in {took:.2f} s"
    )
    assert running.process.returncode == 0
    assert took <= EXIT_BOUND_S
    assert spawned_rows(emceepee_home) == []  # everything it started, stopped and forgotten


@asynccontextmanager
async def killed_with_a_grandchild_left(
    tmp_path: Path, home: Path
) -> AsyncIterator[tuple[processes.Proc, processes.Proc]]:
    """A serve whose backend started a setsid grandchild, killed with SIGKILL once the grandchild
    is journaled; yields the backend and the grandchild (the grandchild still runs)."""
    escaped = tmp_path / "escaped.pid"
    config = write_config(tmp_path / "config.toml", hostile_table("escaper", "--setsid-child", str(escaped)))
    async with serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            backend = processes.identify(int(await running.call("escaper", "pid")))
            assert await running.call("escaper", "echo", text="hello") == "hello"
            grandchild = processes.identify(await until_written(escaped))
            await until_journaled(home, grandchild)
        running.process.kill()
        await running.process.wait()
    with cleaned_up(backend, grandchild):
        with anyio.fail_after(STOP_BOUND_S):
            await gone(backend)  # the parent-death signal
        assert grandchild.running()  # setsid, SIGTERM ignored: only the journal remembers it
        yield backend, grandchild


async def test_a_setsid_grandchild_left_by_a_killed_serve_is_stopped_by_the_next_cli_command(
    tmp_path: Path, emceepee_home: Path
) -> None:
    async with killed_with_a_grandchild_left(tmp_path, emceepee_home) as (_, grandchild):
        listed = run_cli("tasks", "list")
        assert listed.returncode == 0, listed.stderr
        with anyio.fail_after(STOP_BOUND_S):
            await gone(grandchild)
    assert spawned_rows(emceepee_home) == []


async def test_a_setsid_grandchild_left_by_a_killed_serve_is_stopped_by_the_next_serve(
    tmp_path: Path, emceepee_home: Path
) -> None:
    async with killed_with_a_grandchild_left(tmp_path, emceepee_home) as (_, grandchild):
        empty = write_config(tmp_path / "empty.toml", "")
        async with serve(empty):
            with anyio.fail_after(STOP_BOUND_S):
                await gone(grandchild)


async def test_a_journaled_pid_now_naming_another_process_is_never_signalled(
    tmp_path: Path, emceepee_home: Path
) -> None:
    async with killed_with_a_grandchild_left(tmp_path, emceepee_home) as (_, grandchild):
        # As if the grandchild had died and its pid been reused: the row's start time no longer
        # matches the process that has the pid now.
        with sqlite3.connect(journal_path(emceepee_home), timeout=10) as db:
            db.execute("UPDATE spawned SET start_time = start_time - 1 WHERE pid = ?", [grandchild.pid])
        listed = run_cli("tasks", "list")
        assert listed.returncode == 0, listed.stderr
        assert grandchild.running()  # not the process the row names: untouched
        assert spawned_rows(emceepee_home) == []  # and the stale row is settled


async def test_a_grandchild_seen_by_a_running_serve_is_journaled_and_forgotten_once_gone(
    tmp_path: Path, emceepee_home: Path
) -> None:
    escaped = tmp_path / "escaped.pid"
    config = write_config(tmp_path / "config.toml", hostile_table("escaper", "--setsid-child", str(escaped)))
    async with serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            assert await running.call("escaper", "echo", text="hello") == "hello"
            grandchild = processes.identify(await until_written(escaped))
            await until_journaled(emceepee_home, grandchild)
            os.kill(grandchild.pid, signal.SIGKILL)
            await until(lambda: all(pid != grandchild.pid for _, pid, _ in spawned_rows(emceepee_home)))
        await closed_and_timed(running)


def marked(mark: str) -> set[int]:
    """The pids whose environment carries `mark` (what the fork loop and its children inherit)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_process_that_keeps_forking_is_stopped_with_serve(
    tmp_path: Path, emceepee_home: Path
) -> None:
    """A backend leaves behind a setsid process that ignores SIGTERM and forks a child every 20 ms:
    no single look finds all of it, so serve freezes what it finds, looks again, then kills it."""
    mark = f"EMCEEPEE_FORK_LOOP_{os.getpid()}_{time.monotonic_ns()}=1"
    name, _, value = mark.partition("=")
    config = write_config(tmp_path / "config.toml", hostile_table("forky", "--fork-loop", env={name: value}))
    try:
        async with serve(config) as running:
            with anyio.fail_after(30):
                await running.host.tool("list_tools", {})
                assert await running.call("forky", "echo", text="first") == "first"
                await until(lambda: len(marked(mark)) >= 20)  # the loop has been forking a while
            took = await closed_and_timed(running)
        print(f"stdin EOF with a process that keeps forking: serve exited in {took:.2f} s")
        assert running.process.returncode == 0
        assert took <= EXIT_BOUND_S
        with anyio.fail_after(5):  # SIGKILLed processes leave the table as init reaps them
            await until(lambda: not marked(mark))
    finally:
        for pid in marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
