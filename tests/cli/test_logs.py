"""`logs`, `events`, `journal status` and `paths`; `-f` sees what another process writes."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from emceepee_cli.clock import now_iso
from emceepee_cli.ids import new_id
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import OwnedEvent
from tests.cli.clirun import cli
from tests.support import hostile_table, interruptible, write_config

DEADLINE_S = 20.0
WRITE_EVENT = """
import sys
from emceepee_cli.store.journal import Journal
from emceepee_cli.ids import new_id
event = {"event_id": new_id(), "instance_id": "other", "type": sys.argv[2], "server": "alpha",
         "created_at": "2026-11-22T18:00:00.000Z", "data": {"status": "ready"}}
Journal(sys.argv[1]).events.add(event)
"""


class Follower:
    """`emceepee ARGS…` as a real process whose stdout lines are read as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emceepee_cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=interruptible,  # the test's Ctrl-C (stop) must reach it
        )
        self.buffer = b""

    def line(self) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no line within {DEADLINE_S} s; so far: {self.buffer!r}"
            chunk = os.read(self.process.stdout.fileno(), 4096)
            assert chunk, (
                f"the follower ended: {self.process.stderr.read() if self.process.stderr else b''!r}"
            )
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=DEADLINE_S)


def another_process(code: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=60)


def write_logs(home: Path, **logs: str) -> Path:
    folder = home / "data" / "logs"
    folder.mkdir(parents=True)
    for name, text in logs.items():
        (folder / f"{name}.log").write_text(text)
    return folder


def test_logs_shows_the_latest_lines_of_each_backend(emceepee_home: Path) -> None:
    folder = write_logs(emceepee_home, alpha="a1\na2\na3\n", beta="b1\n")
    (folder / "alpha.log.1").write_text("a0\n")
    one = cli("logs", "alpha", "-n", "4")
    every = cli("logs", "-n", "1", "--json")
    assert one.code == 0 and one.out == "a0\na1\na2\na3\n"  # reaching into the rotated file
    assert every.json()["logs"] == [{"server": "alpha", "line": "a3"}, {"server": "beta", "line": "b1"}]


def test_logs_of_an_unknown_backend_names_the_logs_there(emceepee_home: Path) -> None:
    write_logs(emceepee_home, alpha="x\n")
    done = cli("logs", "gamma")
    assert done.code == 2 and "No log for 'gamma'" in done.err and "alpha" in done.err


def test_logs_follow_sees_lines_another_process_appends_and_a_rotation(emceepee_home: Path) -> None:
    folder = write_logs(emceepee_home, alpha="first\n")
    log = folder / "alpha.log"
    follower = Follower("logs", "alpha", "-f")
    try:
        assert follower.line() == "first"
        another_process("import sys; open(sys.argv[1], 'a').write('second\\n')", str(log))
        assert follower.line() == "second"
        rotate = (
            "import os, sys; os.replace(sys.argv[1], sys.argv[1] + '.1'); "
            "open(sys.argv[1], 'w').write('third\\n')"
        )
        another_process(rotate, str(log))
        assert follower.line() == "third"
    finally:
        assert follower.stop() == 0


def test_events_follow_sees_events_another_process_journals(emceepee_home: Path) -> None:
    db = emceepee_home / "data" / "journal.db"
    Journal(db).close()
    follower = Follower("events", "-f", "--json")
    try:
        another_process(WRITE_EVENT, str(db), "server_connected")
        first = follower.line()
        another_process(WRITE_EVENT, str(db), "server_restarted")
        second = follower.line()
    finally:
        assert follower.stop() == 0
    assert '"type": "server_connected"' in first and '"data": {"status": "ready"}' in first
    assert '"type": "server_restarted"' in second


def test_events_and_journal_status_read_without_writing(emceepee_home: Path) -> None:
    db = emceepee_home / "data" / "journal.db"
    journal = Journal(db)
    for kind in ("server_connected", "server_failed"):
        event: OwnedEvent = {
            "event_id": new_id(),
            "instance_id": "i",
            "type": kind,
            "server": "alpha",
            "created_at": "2026-01-01T00:00:00.000Z",
            "data": {},
        }
        journal.events.add(event)
    journal.close()
    before = db.stat().st_mtime_ns
    events = cli("events", "--json")
    table = cli("events")
    status = cli("journal", "status", "--json")
    assert [e["type"] for e in events.json()["events"]] == ["server_connected", "server_failed"]
    assert ["2026-01-01T00:00:00.000Z", "server_failed", "alpha"] in [
        line.split() for line in table.out.splitlines()
    ]
    journal_status = status.json()["journal"]
    assert journal_status["health"] == "ok" and journal_status["private"] is True
    assert journal_status["counts"]["events"] == {"server_connected": 1, "server_failed": 1}
    assert journal_status["oldest"] == "2026-01-01T00:00:00.000Z" and len(journal_status["migrations"]) >= 4
    assert db.stat().st_mtime_ns == before


def test_journal_status_without_a_journal_says_so_and_makes_none(emceepee_home: Path) -> None:
    done = cli("journal", "status")
    assert done.code == 0 and "No journal at" in done.out
    assert not (emceepee_home / "data" / "journal.db").exists()


def test_paths_names_config_journal_logs_and_key(emceepee_home: Path) -> None:
    done = cli("paths", "--json")
    found = done.json()["paths"]
    assert found["config"] == str(emceepee_home / "config.toml")
    assert found["journal"] == str(emceepee_home / "data" / "journal.db")
    assert found["logs"] == str(emceepee_home / "data" / "logs")
    assert found["key"] == str(emceepee_home / "data" / "install.key")
    assert "claude-desktop" in done.json()["hosts"]


def _journal_events(db: Path, *events: tuple[str, str, str]) -> list[str]:
    """(type, server, created_at) events journaled in order; their ids."""
    journal = Journal(db)
    ids = []
    for kind, server, at in events:
        event: OwnedEvent = {
            "event_id": new_id(),
            "instance_id": "i",
            "type": kind,
            "server": server,
            "created_at": at,
            "data": {},
        }
        journal.events.add(event)
        ids.append(event["event_id"])
    journal.close()
    return ids


def test_events_filter_by_type_server_and_since_and_limit_like_every_listing(emceepee_home: Path) -> None:
    db = emceepee_home / "data" / "journal.db"
    recent = now_iso(-60)  # a minute ago
    ids = _journal_events(
        db,
        ("server_connected", "alpha", "2026-01-01T00:00:00.000Z"),
        ("task_status", "alpha", "2026-01-01T10:00:00.000Z"),
        ("server_failed", "beta", recent),
        ("task_status", "beta", recent),
    )

    def types(*args: str) -> list[tuple[str, str]]:
        done = cli("events", *args, "--json")
        assert done.code == 0, done.err
        return [(e["type"], e["server"]) for e in done.json()["events"]]

    assert types("--type", "task_status") == [("task_status", "alpha"), ("task_status", "beta")]
    assert types("--type", "task_status", "--type", "server_failed", "--server", "beta") == [
        ("server_failed", "beta"),
        ("task_status", "beta"),
    ]
    assert types("--since", "10m") == [("server_failed", "beta"), ("task_status", "beta")]
    assert (
        types("--since", "2026-01-01T09:00Z") == types("--since", ids[0]) == types("--since", ids[0].lower())
    )
    assert len(types("--since", "2026-01-01T09:00Z")) == 3
    assert types("--limit", "1") == types("-n", "1") == types("--lines", "1") == [("task_status", "beta")]
    refused = cli("events", "--since", "yesterday-ish")
    assert refused.code == 2 and "--since 10m" in refused.err


def test_the_former_lines_option_is_kept_for_logs_but_no_longer_shown(emceepee_home: Path) -> None:
    write_logs(emceepee_home, alpha="a1\na2\na3\n")
    assert cli("logs", "alpha", "--lines", "2").out == cli("logs", "alpha", "--limit", "2").out == "a2\na3\n"
    for words in (["logs"], ["events"], ["tasks", "list"]):
        shown = cli(*words, "--help").out
        assert "-n, --limit" in shown and "--lines" not in shown, words


def test_logs_reach_into_every_rotated_file(emceepee_home: Path) -> None:
    folder = write_logs(emceepee_home, alpha="a4\n")
    for n, text in ((1, "a3\n"), (2, "a2\n"), (3, "a1\n")):
        (folder / f"alpha.log.{n}").write_text(text)
    assert cli("logs", "alpha", "-n", "3").out == "a2\na3\na4\n"
    assert cli("logs", "alpha", "-n", "10").out == "a1\na2\na3\na4\n"


def test_after_a_failing_call_its_log_says_why_and_which_command_started_it(tmp_path: Path) -> None:
    config = str(write_config(tmp_path / "config.toml", hostile_table("h")))
    died = cli("call", "h", "die", "code=4", "--config", config)
    logged = cli("logs", "h")
    assert died.code == 3 and "emceepee logs h" in died.err
    lines = logged.out.splitlines()
    assert logged.code == 0 and any(
        re.search(r"--- started by emceepee call \(pid \d+\) ---$", line) for line in lines
    )
    assert any(line.endswith("hostile: dying on request") for line in lines), logged.out


def test_tools_and_doctor_log_the_backends_they_start_each_start_marked(tmp_path: Path) -> None:
    config = str(write_config(tmp_path / "config.toml", hostile_table("h", "--say", "hello from h")))
    assert cli("tools", "h", "--config", config).code == 0
    cli("doctor", "--config", config, "--wait", "20")
    logged = cli("logs", "h", "-n", "100").out
    starts = re.findall(r"--- started by (emceepee \w+) \(pid \d+\) ---", logged)
    assert starts == ["emceepee tools", "emceepee doctor"], logged
    assert logged.count("hello from h") == 2
