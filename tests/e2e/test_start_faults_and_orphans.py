"""Start-up on a data folder serve cannot write, the processes serve adopts, and a host waiting on
an approval, over the real `emceepee serve` process:

- a fresh install whose data folder is read-only: serve answers from memory, every reply says
  which folder and the command that fixes it, and nothing is written there (no logs folder, no
  key, no spool file, no journal);
- an orphan a backend leaves that exits before serve's next scan is reaped (no zombie stays under
  serve), and a backend's own exit code is still the one reported;
- a process serve adopted without knowing which backend left it is named truly by the CLI that
  stops it after a `kill -9` of serve;
- `add_server` waiting for a person's approval sends the host heartbeats when it sent a
  progressToken, and does not hold serve up when the host closes stdin.

The read-only folder binds emceepee as it binds a user on their own 0500 folder: as root (these
tests often run as root), serve runs behind tests/support.py's AS_OWNER_PREFIX.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from emceepee_cli import processes as procs
from emceepee_cli.calls.call import HEARTBEAT_ENV
from emceepee_cli.calls.spool import BUDGET_ENV
from tests.e2e import test_backend_processes as processes
from tests.e2e import test_journal_faults as journal_faults
from tests.e2e.test_journal_start_faults import open_as_a_host
from tests.e2e.test_orphans import (
    EXIT_BOUND_S,
    cleaned_up,
    closed_and_timed,
    spawned_rows,
    until_journaled,
    until_written,
)
from tests.support import (
    AS_OWNER_PREFIX,
    EXAMPLES,
    HOSTILE,
    example_table,
    hostile_table,
    run_cli,
    serve_command,
    until,
    write_config,
)

pytestmark = pytest.mark.anyio
needs_proc = pytest.mark.skipif(not procs.HAVE_PROC, reason="needs /proc to follow processes by pid")

SCANS_S = 15.0  # serve looks below itself once a second; generous for a loaded machine


async def test_a_fresh_install_whose_data_folder_is_read_only_serves_from_memory_and_says_how_to_fix_it(
    tmp_path: Path, emceepee_home: Path
) -> None:
    data = emceepee_home / "data"
    data.mkdir(parents=True)
    data.chmod(0o500)  # exists, empty, and this user cannot write it: no logs/, key, spool or journal yet
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    env = {**os.environ, BUDGET_ENV: "0"}  # every backend result would go to a spool file in there
    try:
        async with journal_faults.serve(config, env, [*AS_OWNER_PREFIX, *serve_command(config)]) as run:
            with anyio.fail_after(60):
                opening = await open_as_a_host(run, "echo")
            code = await run.stop()
        left = sorted(p.name for p in data.iterdir())
    finally:
        data.chmod(0o700)

    flags = opening.flags
    assert opening.init["serverInfo"]["name"] == "emceepee"
    assert "list_servers" in {tool["name"] for tool in opening.listed["tools"]}
    assert [s["name"] for s in opening.servers["structuredContent"]["servers"]] == ["echo"]
    assert opening.echoed["content"][0]["text"] == "hi" and not opening.echoed.get("isError"), opening.echoed
    for flag in flags:  # every reply names the folder and the command that fixes it
        assert flag == flags[0]
        assert f"its folder {data} is not writable" in flag["message"], flag
        assert flag["hint"].startswith(f"chmod u+w {data} ("), flag
    assert code == 0, run.log
    assert "Traceback" not in run.log, run.log
    assert f"the backends' stderr logs {data / 'logs'}" in run.log and f"chmod u+w {data}" in run.log
    assert "The install key" in run.log and "signs its tokens with a key of its own" in run.log
    assert left == []  # nothing was written there


def zombies_below(pid: int) -> list[int]:
    """The children of `pid` (of any of its threads) that have exited and that nobody has reaped."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended
            continue
        for child in children:
            info = procs.stat(int(child))
            if info is not None and info.state == "Z":
                found.append(int(child))
    return found


@needs_proc
async def test_an_orphan_that_exits_between_two_scans_is_reaped_and_backends_keep_their_exit_codes(
    tmp_path: Path,
) -> None:
    quick, dying = tmp_path / "quick.pid", tmp_path / "dying.pid"
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("orphaner", "--quick-orphan", str(quick)),
        # leaves an orphan and exits at once, at every start: its exit and the orphan's come together
        hostile_table("dier", "--quick-orphan", str(dying), "--exit-at-start", "5"),
    )
    async with processes.serve(config) as running:
        serve_pid = running.process.pid
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {"server": "orphaner"})
            assert await running.call("orphaner", "echo", text="hello") == "hello"
            orphan = await until_written(quick)
            await until_written(dying)
            died_at_start = await running.call("dier", "echo", text="x")
        with anyio.fail_after(SCANS_S):  # the old code left each one a zombie until serve exited
            await until(lambda: not zombies_below(serve_pid) and not Path(f"/proc/{orphan}").exists())
        with anyio.fail_after(30):
            died = await running.call("orphaner", "die", code=7)
            servers = {s["name"]: s for s in (await running.host.tool("list_servers", {}))["servers"]}
        await closed_and_timed(running)

    assert "exit code 5" in died_at_start, died_at_start
    assert "exit code 7" in died, died
    assert "exit code 5" in servers["dier"]["last_error"], servers
    assert running.process.returncode == 0
    assert "Unknown child process" not in running.stderr.decode(errors="replace")  # asyncio lost none


@needs_proc
async def test_a_process_adopted_from_no_known_backend_is_named_truly_when_the_cli_stops_it(
    tmp_path: Path, emceepee_home: Path
) -> None:
    escaped = tmp_path / "escaped.pid"
    config = write_config(tmp_path / "config.toml", hostile_table("leaver", "--setsid-orphan", str(escaped)))
    async with processes.serve(config) as running:
        serve_pid = running.process.pid
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            backend = procs.identify(int(await running.call("leaver", "pid")))
            assert await running.call("leaver", "echo", text="hello") == "hello"
            orphan = procs.identify(await until_written(escaped))
            await until_journaled(emceepee_home, orphan)
        rows = spawned_rows(emceepee_home)
        running.process.kill()
        await running.process.wait()
    with cleaned_up(backend, orphan):
        with anyio.fail_after(processes.STOP_BOUND_S):
            await processes.gone(backend)  # the parent-death signal
        assert orphan.running()  # setsid, SIGTERM ignored: only the journal remembers it
        listed = run_cli("tasks", "list")
        with anyio.fail_after(processes.STOP_BOUND_S):
            await processes.gone(orphan)

    assert ("", orphan.pid, orphan.start) in rows  # no backend is known for it
    assert listed.returncode == 0, listed.stderr
    said = f"stopped pid {orphan.pid}: a process left by a backend of serve pid {serve_pid}, which is dead"
    assert said in listed.stderr, listed.stderr
    assert "backend ''" not in listed.stderr
    assert spawned_rows(emceepee_home) == []


async def test_add_server_waiting_for_approval_sends_the_host_heartbeats(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    env = {**os.environ, HEARTBEAT_ENV: "0.2"}  # not every 10 s
    added = {
        "name": "extra",
        "command": sys.executable,
        "args": [str(EXAMPLES / "echo.py")],
        "timeout_ms": 1500,  # no person answers: the call ends with the approval still pending
    }
    async with journal_faults.serve(config, env) as run:
        with anyio.fail_after(30):
            await journal_faults.start(run)
            assert (
                await run.host.tool(
                    "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}}
                )
            )["content"][0]["text"] == "hi"
            before = len(run.host.heard)
            reply = await run.host.send(
                "tools/call", {"name": "add_server", "arguments": added, "_meta": {"progressToken": "add-1"}}
            )
        code = await run.stop()

    progress = [m["params"] for m in run.host.heard[before:] if m["method"] == "notifications/progress"]
    assert progress, run.host.heard
    assert {p["progressToken"] for p in progress} == {"add-1"}
    assert "a person's approval of add_server('extra')" in progress[0]["message"], progress
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    assert reply["structuredContent"]["approval"]["status"] == "pending", reply
    assert code == 0, run.log


async def test_closing_stdin_while_an_add_server_approval_waits_exits_at_once(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("plain"))
    added = {"name": "extra", "command": sys.executable, "args": [str(HOSTILE)], "timeout_ms": 300}
    async with processes.serve(config) as running:
        with anyio.fail_after(30):
            await running.host.tool("list_tools", {})
            assert await running.call("plain", "echo", text="first") == "first"
            waiting = await running.host.tool("add_server", added)
        took = await closed_and_timed(running)  # the old code waited for the approval's expiry
    print(f"stdin EOF with an add_server approval pending: serve exited in {took:.2f} s")
    assert waiting["approval"]["status"] == "pending", waiting
    assert running.process.returncode == 0
    assert took <= EXIT_BOUND_S
    assert waiting["approval"]["request_id"] not in run_cli("pending", "--json").stdout
