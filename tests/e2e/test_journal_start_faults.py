"""A journal that cannot be used when `serve` starts, with real `serve` processes and the real CLI:
a file that is not a database, a database cut short (on a page boundary, or inside its last page,
which SQLite itself reads as sound), a read-only file, a read-only folder, a journal from a newer
emceepee, one another process keeps locked past serve's wait. `serve` answers from
memory and every reply says what is wrong and the command that fixes it; the file is left exactly
as it was; the CLI and `doctor` give the same fix.

The read-only faults run emceepee as the file's owner without the power to override file modes:
as root (these tests often run as root), CAP_DAC_OVERRIDE is dropped from the bounding set before
exec, so the modes bind it exactly as they bind a user on their own 0400 file.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import paths
from emceepee_cli.clock import now_iso
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskRow, TaskStatus
from tests.e2e.test_journal_faults import Run, serve
from tests.support import AS_OWNER_PREFIX, Gate, example_table, hostile_table, serve_command, write_config

pytestmark = pytest.mark.anyio

TASK_ID = "01JQZ00000000000000000TASK"
PROMOTED = 20  # calls of the served session promoted to tasks: their rows fill the journal's last pages


@dataclass(frozen=True)
class Fault:
    """How to break the journal, what the reply must say, and how the fix reads."""

    make: Callable[[Path], None]
    says: str  # in the message
    fix: str  # in the hint: the command that fixes it
    as_owner: bool = False  # run emceepee without the power to override file modes
    own_folder: bool = False  # the journal in a folder of its own (EMCEEPEE_DB)
    cli_reads: bool = False  # the CLI can still list its tasks (only writing is refused)
    locked: bool = False  # another process holds the journal locked all along
    served: bool = False  # `make` breaks a journal a real serve session wrote (`served_journal`)


def journal_with_rows(db: Path) -> None:
    """A real journal with a working task, big enough that cutting it leaves a valid header and a
    missing middle."""
    journal = Journal(db)
    for n in range(2000):
        journal.instances.register(f"I{n:05d}")
    at = now_iso()
    journal.tasks.insert(
        TaskRow(
            task_id=TASK_ID,
            instance_id="I00000",
            server="echo",
            tool="slow",
            args="{}",
            status=TaskStatus.WORKING.value,
            status_message=None,
            progress=None,
            result=None,
            error=None,
            created_at=at,
            last_updated_at=at,
            expires_at=None,
            finished_at=None,
            cancel_requested=0,
            request_state=None,
            round=None,
        )
    )
    journal.close()


def not_a_database(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database\n" * 200)


def cut_short(db: Path) -> None:
    journal_with_rows(db)
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size // 2)
    assert db.read_bytes().startswith(b"SQLite format 3\x00")


def cut_inside_last_page(db: Path, by: int) -> None:
    """The served journal cut short by `by` bytes, less than a page: SQLite counts the cut page as
    whole and reads its missing tail as zeros (quick_check may well say ok, depending on the page)."""
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.truncate(size - by)
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        page, pages = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_size", "page_count"))
    conn.close()
    assert size % page == 0 and 0 < by < page and pages == size // page
    for sidecar in db.parent.glob(db.name + "-*"):  # the reader's empty -wal and -shm
        sidecar.unlink()


def read_only_file(db: Path) -> None:
    journal_with_rows(db)
    db.chmod(0o400)


def read_only_folder(db: Path) -> None:
    journal_with_rows(db)
    db.parent.chmod(0o500)  # the journal's own folder (--db): emceepee's data folder stays writable


def newer(db: Path) -> None:  # as a newer emceepee leaves it: one migration this one does not know
    journal_with_rows(db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('emceepee', 'm999_future', 'x')"
        )
    conn.close()


FAULTS = {
    "not a database": Fault(not_a_database, "not a usable SQLite file", "mv "),
    "cut short": Fault(cut_short, "not a usable SQLite file", "mv "),
    **{
        f"cut by {by} bytes": Fault(
            functools.partial(cut_inside_last_page, by=by), "not a usable SQLite file", "mv ", served=True
        )
        for by in (1, 100, 2000, 4095)
    },
    "read-only file": Fault(
        read_only_file, "cannot be opened for writing", "chmod u+w ", as_owner=True, cli_reads=True
    ),
    "read-only folder": Fault(
        read_only_folder, "cannot be opened for writing", "chmod u+w ", as_owner=True, own_folder=True
    ),
    "newer": Fault(newer, "written by a newer emceepee", "Upgrade emceepee"),
    # still locked once serve's open gives up (after OPEN_RETRY_S): this one takes about 20 s
    "locked": Fault(journal_with_rows, "is locked by another process", "stop other emceepee", locked=True),
}
NOT_LOCKED = [kind for kind, fault in FAULTS.items() if not fault.locked]


@contextmanager
def held(db: Path, fault: Fault) -> Iterator[None]:
    """The journal locked by another process (exclusively, reads too) while `fault` says so."""
    if not fault.locked:
        yield
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("COMMIT")
    finally:
        conn.close()


def snapshot(db: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes and mtime, and the files beside it (`-wal`, `-shm`…): none may change."""
    beside = sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name))
    return db.read_bytes(), db.stat().st_mtime_ns, beside


async def call(run: Run, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tools/call's result, and the journal_error block it carries (there must be exactly one)."""
    result = await run.host.send("tools/call", {"name": name, "arguments": arguments})
    texts = [b["text"] for b in result["content"] if b["type"] == "text"]
    flags = [json.loads(t)["journal_error"] for t in texts if t.startswith('{"journal_error":')]
    assert len(flags) == 1, result
    return result, flags[0]


@dataclass
class Opening:
    """What a host's first steps got from a serve whose journal is at fault, and each flag."""

    init: dict[str, Any]
    listed: dict[str, Any]
    servers: dict[str, Any]
    echoed: dict[str, Any]
    flags: list[dict[str, Any]]


async def open_as_a_host(run: Run, server: str) -> Opening:
    """As a host begins: initialize, list emceepee's tools, list servers, list `server`'s tools
    until it is up, call its echo; each reply must carry the journal_error block (`call`)."""
    init = await run.host.send(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test-host", "version": "0"},
        },
    )
    await run.host.send("notifications/initialized", notify=True)
    listed = await run.host.send("tools/list")
    servers, flag = await call(run, "list_servers", {})
    flags = [flag]
    while True:  # the backend starts in the background: list until its tools are there
        tools, flag = await call(run, "list_tools", {"server": server})
        flags.append(flag)
        [group] = tools["structuredContent"]["servers"]
        assert group["status"] != "failed", (group, run.log)
        if "tools" in group:
            break
    echoed, flag = await call(run, "execute_tool", {"server": server, "tool": "echo", "args": {"text": "hi"}})
    return Opening(init, listed, servers, echoed, [*flags, flag])


def backend_text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", hostile_table("h"))  # stdlib: quick to start; its gates


@pytest.fixture(scope="module")
def served_journal(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A journal as a real serve session leaves it: calls, a promoted task, a question parked for a
    host that cannot show forms, and the events of all of them (some never delivered: the host left).
    Made once, for the tests of both kinds (the CLI's are not async)."""
    return anyio.run(serve_a_session, tmp_path_factory.mktemp("served"))


async def serve_a_session(home: Path) -> bytes:
    db = home / "journal.db"
    config = write_config(
        home / "config.toml", example_table("echo", "echo.py"), example_table("elicit", "elicit.py")
    )
    env = {**os.environ, "EMCEEPEE_HOME": str(home / "home"), "EMCEEPEE_DB": str(db)}
    async with serve(config, env) as run:
        with anyio.fail_after(90):
            await run.host.initialize()
            await run.host.send("tools/list")
            for server in ("echo", "elicit"):
                while "tools" not in (await run.host.tool("list_tools", {"server": server}))["servers"][0]:
                    pass  # each listing waits a little for a backend still starting
            await run.host.tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}})
            slow = {"server": "echo", "tool": "slow", "args": {"seconds": 0.1, "steps": 1}, "timeout_ms": 10}
            for _ in range(PROMOTED):
                task_id = (await run.host.tool("execute_tool", slow))["proxy_task"]["task_id"]
                await run.host.tool("get_task_result", {"task_id": task_id, "timeout_ms": 20000})
            asked = {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}, "timeout_ms": 10}
            await run.host.tool("execute_tool", asked)
            while not (await run.host.tool("await_activity", {"timeout_ms": 5000}))["pending_client"][
                "elicitations"
            ]:
                pass  # the question is parked: this host declared no elicitation
            assert await run.stop() == 0, run.log
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        counts = {
            t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("tasks", "pending", "events")
        }
    conn.close()
    assert counts["tasks"] > PROMOTED and counts["pending"] == 1 and counts["events"] > PROMOTED, counts
    return db.read_bytes()


@pytest.fixture(params=list(FAULTS))
def fault(request: pytest.FixtureRequest) -> Fault:
    return FAULTS[str(request.param)]


@pytest.fixture
def db(
    fault: Fault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """The journal, broken as `fault` says; its folder writable again afterwards, for clean-up."""
    if fault.own_folder:
        monkeypatch.setenv("EMCEEPEE_DB", str(tmp_path / "journal-folder" / "journal.db"))
    path = paths.db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if fault.served:
        path.write_bytes(request.getfixturevalue("served_journal"))
    fault.make(path)
    yield path
    path.parent.chmod(0o700)


async def test_serve_on_a_journal_it_cannot_use_answers_from_memory_and_every_reply_says_how_to_fix_it(
    fault: Fault, config: Path, db: Path, tmp_path: Path
) -> None:
    gate = Gate(tmp_path / "gate")
    before = snapshot(db)
    command = [*AS_OWNER_PREFIX, *serve_command(config)] if fault.as_owner else None
    with held(db, fault):
        async with serve(config, command=command) as run:
            with anyio.fail_after(90):
                opening = await open_as_a_host(run, "h")
                flags = opening.flags
                gated = {"server": "h", "tool": "gated", "args": gate.args("done"), "timeout_ms": 10}
                promoted, flag = await call(run, "execute_tool", gated)
                flags.append(flag)
                task_id = promoted["structuredContent"]["proxy_task"]["task_id"]
                gate.open()
                result, flag = await call(run, "get_task_result", {"task_id": task_id, "timeout_ms": 20000})
                flags.append(flag)
                tasks, flag = await call(run, "list_tasks", {"include_completed": True})
                flags.append(flag)
            code = await run.stop()
    after = snapshot(db)

    assert opening.init["serverInfo"]["name"] == "emceepee"
    assert "list_servers" in {tool["name"] for tool in opening.listed["tools"]}
    assert [s["name"] for s in opening.servers["structuredContent"]["servers"]] == ["h"]
    assert backend_text(opening.echoed) == "hi"
    assert backend_text(result) == "done"
    assert [t["task_id"] for t in tasks["structuredContent"]["tasks"]] == [task_id]
    assert opening.servers["structuredContent"]["journal_error"] == flags[0]  # ours carry it structured too
    for flag in flags:
        assert flag == flags[0]
    flag = flags[0]
    assert flag["type"] == "JournalError"
    assert str(db) in flag["message"] and fault.says in flag["message"], flag
    assert fault.fix in flag["hint"] and "restart your MCP host" in flag["hint"], flag
    assert "in memory only" in flag["hint"]
    assert code == 0, run.log
    assert run.log.count(fault.says) == 1, run.log  # stderr says it once
    assert "Traceback" not in run.log
    assert after == before, run.log  # not a byte, not a timestamp, no new file beside it


@pytest.mark.parametrize("fault", NOT_LOCKED, indirect=True)  # the CLI's wait on a lock: test_journal.py
def test_the_cli_and_doctor_on_a_journal_serve_cannot_use_give_the_same_fix(
    fault: Fault, config: Path, db: Path
) -> None:
    before = snapshot(db)[:2]
    prefix = AS_OWNER_PREFIX if fault.as_owner else []
    listed = run_as(prefix, "tasks", "list")
    cancel = run_as(prefix, "tasks", "cancel", TASK_ID)
    doctor = run_as(prefix, "doctor", "--config", str(config), "--json")
    after = snapshot(db)[:2]  # (a read-only SQLite reader may leave an empty -wal and -shm beside it)

    if fault.cli_reads:
        assert listed.returncode == 0 and TASK_ID in listed.stdout, listed.stderr
    else:
        assert listed.returncode == 4 and fault.fix in listed.stderr, listed.stderr
    assert cancel.returncode == 4, cancel.stderr
    assert fault.says in cancel.stderr and fault.fix in cancel.stderr, cancel.stderr
    assert "Traceback" not in listed.stderr + cancel.stderr
    [check] = [c for c in json.loads(doctor.stdout)["checks"] if c["area"] == "journal"]
    assert doctor.returncode == 1 and check["state"] == "fail", check
    assert fault.fix.lower() in check["fix"].lower(), check
    assert after == before


def run_as(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`emceepee ARGS…` as a real process, behind `prefix` (this test's emceepee home)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "emceepee_cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


# An event row's data as damage leaves it, in a file that is still a sound database.
BAD_EVENT_DATA: dict[str, str | bytes] = {
    "not JSON": '{"task_id": ',
    "a control character": '{"status": "\x01"}',
    "a blob of NUL bytes": b"\x00\x00\xff\x00",
    "not an object": "[1, 2]",
    "text that is not UTF-8": b'{"status": "\xff\xfe"}',  # stored as TEXT: SQLite does not check
}
AS_TEXT = {"text that is not UTF-8"}


@pytest.mark.parametrize("bad", list(BAD_EVENT_DATA))
async def test_serve_on_a_journal_with_an_event_row_that_does_not_decode_delivers_the_other_events(
    served_journal: bytes, config: Path, bad: str
) -> None:
    db = paths.db_path()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(served_journal)
    with sqlite3.connect(db) as conn:  # the events the served session's host never received
        (cursor,) = conn.execute("SELECT last_event_id FROM cursors").fetchone()
        sql = "SELECT event_id FROM events WHERE event_id > ? ORDER BY event_id"
        undelivered = [r[0] for r in conn.execute(sql, [cursor])]
        value = "CAST(? AS TEXT)" if bad in AS_TEXT else "?"
        conn.execute(
            f"UPDATE events SET data = {value} WHERE event_id = ?", [BAD_EVENT_DATA[bad], undelivered[0]]
        )
    conn.close()
    assert len(undelivered) >= 2, undelivered
    async with serve(config) as run:
        with anyio.fail_after(60):
            await run.host.initialize()
            await run.host.send("tools/list")
            replies = [
                await run.host.send("tools/call", {"name": name, "arguments": arguments})
                for name, arguments in (("list_servers", {}), ("list_tasks", {"include_completed": True}))
            ]
        code = await run.stop()
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        conn.text_factory = bytes if bad in AS_TEXT else str
        kept = conn.execute("SELECT data FROM events WHERE event_id = ?", [undelivered[0]]).fetchone()[0]
    conn.close()

    events = [e for r in replies for e in r["structuredContent"].get("events_since_last_response", [])]
    assert [e["event_id"] for e in events if e.get("replayed")] == undelivered[1:]
    assert not any("journal_error" in r["structuredContent"] for r in replies)  # the file is in use
    assert len(replies[1]["structuredContent"]["tasks"]) == PROMOTED + 1  # the journal's tasks
    assert run.log.count(undelivered[0]) == 1, run.log  # logged once, by id
    assert "Traceback" not in run.log and code == 0, run.log
    assert kept == BAD_EVENT_DATA[bad]  # left as it was, for a look later


async def test_serve_on_a_journal_with_task_rows_that_do_not_decode_lists_them_and_says_which_result_is_lost(
    served_journal: bytes, config: Path
) -> None:
    db = paths.db_path()
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(served_journal)
    with sqlite3.connect(db) as conn:
        sql = "SELECT task_id FROM tasks WHERE status = 'completed' ORDER BY task_id"
        lost, slowed, *_ = [r[0] for r in conn.execute(sql)]
        conn.execute("UPDATE tasks SET result = ? WHERE task_id = ?", ['{"content": [{"type": "te', lost])
        conn.execute("UPDATE tasks SET progress = ? WHERE task_id = ?", ["\x00\x01", slowed])
    conn.close()
    async with serve(config) as run:
        with anyio.fail_after(60):
            await run.host.initialize()
            listed = await run.host.tool("list_tasks", {"include_completed": True})
            result = await run.host.send(
                "tools/call", {"name": "get_task_result", "arguments": {"task_id": lost}}
            )
            kept = await run.host.send(
                "tools/call", {"name": "get_task_result", "arguments": {"task_id": slowed}}
            )
            again = await run.host.tool("list_tasks", {"include_completed": True})
        code = await run.stop()

    assert {t["task_id"] for t in listed["tasks"]} >= {lost, slowed} and listed["tasks"] == again["tasks"]
    assert result["isError"] and f"result of task {lost} cannot be read" in result["content"][0]["text"], (
        result
    )
    assert "bug" not in result["content"][0]["text"]
    assert kept["content"][0]["text"] == "slept 0.1 s" and not kept.get("isError"), kept
    assert run.log.count(f"progress of task {slowed}") == 1, run.log  # listed twice, logged once
    assert "Traceback" not in run.log and code == 0, run.log
