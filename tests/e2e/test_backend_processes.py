"""Backend processes over a real `emceepee serve`: stopped at once, however they behave; nothing left behind.

Each test drives serve with raw JSON-RPC lines (so it owns serve's pid and stdin), notes every
process serve started (`processes.tree`, which also sees children that left their process group),
and checks by pid and start time that none outlives the stop.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

from emceepee_cli import processes
from tests.support import RawHost, hostile_table, serve_command, write_config

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not processes.HAVE_PROC, reason="needs /proc to see every process serve started"),
]

STOP_BOUND_S = 15.0  # generous: on an idle machine the stops below take 0.1 s to 4 s


class Serve:
    """One `emceepee serve` process: the host's side of its pipes, and what it wrote to stderr."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.host = RawHost(process)
        self.stderr = bytearray()
        self.drained = anyio.Event()

    async def drain_stderr(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk
        self.drained.set()

    async def call(self, server: str, tool: str, **args: object) -> str:
        result = await self.host.tool("execute_tool", {"server": server, "tool": tool, "args": args})
        if "error" in result:
            return str(result["error"]["message"])
        return str(result["content"][0]["text"])


@asynccontextmanager
async def serve(config: Path) -> AsyncIterator[Serve]:
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    running = Serve(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(running.drain_stderr)
            with anyio.fail_after(30):
                await running.host.initialize()
                await running.host.tool("list_servers", {})
            yield running
            if process.returncode is not None:
                with anyio.move_on_after(5):  # its last lines, for the test's checks
                    await running.drained.wait()
            tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()


async def gone(proc: processes.Proc) -> None:
    """Return once `proc` has exited (the caller bounds the wait)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    try:
        if proc.running():
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def kill_all(found: set[processes.Proc]) -> None:
    """Clean up after a failed test: these ignore stdin EOF and SIGTERM."""
    for proc in found:
        proc.signal(signal.SIGKILL)


async def stop_and_time(running: Serve, how: str) -> tuple[float, set[processes.Proc]]:
    """Stop serve by `how` ("eof" or "sigterm"); the time it took and what it had started."""
    started = processes.tree(running.process.pid)
    began = time.monotonic()
    if how == "eof":
        assert running.process.stdin is not None
        await running.process.stdin.aclose()
    else:
        running.process.send_signal(signal.SIGTERM)
    try:
        with anyio.fail_after(STOP_BOUND_S):
            await running.process.wait()
    except TimeoutError:
        kill_all(started)
        raise
    return time.monotonic() - began, started


async def test_closing_stdin_stops_every_backend_at_once_however_it_behaves(tmp_path: Path) -> None:
    escaped = tmp_path / "escaped.pid"
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("starting", "--handshake", "hang"),
        hostile_table("stubborn", "--ignore-eof", "--ignore-sigterm"),
        hostile_table("escaper", "--setsid-child", str(escaped)),
    )
    async with serve(config) as running:
        with anyio.fail_after(30):
            pids = {name: int(await running.call(name, "pid")) for name in ("stubborn", "escaper")}
        grandchild = int(escaped.read_text())
        took, started = await stop_and_time(running, "eof")
    left = {proc for proc in started if proc.running()}
    kill_all(left)
    assert {pids["stubborn"], pids["escaper"], grandchild} <= {proc.pid for proc in started}
    assert len(started) == 4, started  # the three backends and the child that called setsid()
    assert not left, f"outlived serve: {left}"
    assert running.process.returncode == 0
    assert b"did not exit" not in running.stderr and b"survived" not in running.stderr
    print(f"stdin EOF with a handshaking, a stubborn and an escaping backend: serve exited in {took:.2f} s")
    assert took <= 3.0  # the README's promise: stdin EOF to exit within 3 s, whatever a backend does


async def test_sigterm_stops_well_behaved_backends_without_waiting_out_the_escalation(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("one"), hostile_table("two"))
    async with serve(config) as running:
        with anyio.fail_after(30):
            for name in ("one", "two"):
                await running.call(name, "pid")
        took, started = await stop_and_time(running, "sigterm")
    assert len(started) == 2 and not any(proc.running() for proc in started)
    assert running.process.returncode == 0
    # The exit is seen by the stop itself, so nothing is escalated and nothing is misreported.
    assert b"did not exit" not in running.stderr and b"survived" not in running.stderr
    print(f"SIGTERM with two well-behaved backends: serve exited in {took:.2f} s")


async def test_what_a_killed_serve_left_running_is_stopped_by_the_next_serve(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("polite", "--ignore-eof"),
        hostile_table("stubborn", "--ignore-eof", "--ignore-sigterm"),
    )
    async with serve(config) as running:
        with anyio.fail_after(30):
            polite = processes.identify(int(await running.call("polite", "pid")))
            stubborn = processes.identify(int(await running.call("stubborn", "pid")))
        running.process.kill()
        await running.process.wait()
    try:
        with anyio.fail_after(STOP_BOUND_S):
            await gone(polite)  # the parent-death signal: it did not need to see stdin close
        assert stubborn.running()  # it ignores that signal too; the journal remembers it
        empty = write_config(tmp_path / "empty.toml", "")
        async with serve(empty):
            with anyio.fail_after(STOP_BOUND_S):
                await gone(stubborn)
    finally:
        kill_all({polite, stubborn})


async def test_a_log_folder_that_cannot_be_written_costs_only_the_log_file(
    tmp_path: Path, emceepee_home: Path
) -> None:
    (emceepee_home / "data").mkdir(parents=True)
    (emceepee_home / "data" / "logs").write_text("a file where the log folder should be")
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    async with serve(config) as running:
        with anyio.fail_after(30):
            echoed = await running.call("h", "echo", text="still here")
            logs = await running.host.tool("get_logs", {"server": "h"})
        _, started = await stop_and_time(running, "eof")
    assert echoed == "still here"
    assert any("cannot write the stderr log" in entry["message"] for entry in logs["logs"])
    assert len(started) == 1 and not any(proc.running() for proc in started)
