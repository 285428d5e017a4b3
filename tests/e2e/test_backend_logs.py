"""A backend's stderr log, written by whatever starts it: a running `serve`, and beside it the
terminal commands (`call`), each start marked with its command; rotated as `log_backups` says."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from emceepee_cli.backends.logfile import LOG_ROTATE_BYTES, LogFile, LogPlace
from tests.support import hostile_table, run_cli, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio
MARKER = re.compile(r"--- started by (emceepee \w+) \(pid \d+\) ---$")


async def test_serve_keeps_as_many_rotated_logs_as_log_backups_says_and_a_call_beside_it_logs_too(
    tmp_path: Path, emceepee_home: Path
) -> None:
    config = write_config(tmp_path / "config.toml", "[defaults]\nlog_backups = 3\n", hostile_table("h"))
    logs = emceepee_home / "data" / "logs"
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_servers", {})
            written = await client.call_tool(
                "execute_tool", {"server": "h", "tool": "stderr_lines", "args": {"mb": 4.5}}
            )
            called = run_cli("call", "h", "echo", "text=from the terminal", "--config", str(config))
            await still_answering(client)
    assert texts(written) == ["lines written"] and called.returncode == 0, called.stderr
    assert called.stdout == "from the terminal\n"
    kept = sorted(p.name for p in logs.glob("h.log*"))
    assert kept == ["h.log", "h.log.1", "h.log.2", "h.log.3"]  # the oldest of four rotations dropped
    assert all(p.stat().st_size <= LOG_ROTATE_BYTES + 8192 for p in logs.glob("h.log*"))
    starts = [m.group(1) for line in (logs / "h.log").read_text().splitlines() if (m := MARKER.search(line))]
    assert starts[-1] == "emceepee call"  # its start, in the file serve writes too


def test_a_writer_whose_log_another_process_rotated_goes_on_in_the_new_file(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "b.log"
    ours, theirs = (LogFile(LogPlace(path, backups=2, starter=who), print) for who in ("emceepee serve", "x"))
    line = "y" * 1000
    for _ in range(LOG_ROTATE_BYTES // 1000 + 10):  # `theirs` rotates first: it wrote the file full
        theirs.write(line)
    ours.write(line)  # ours is in the rotated file now; past the size, it follows instead of rotating
    for _ in range(LOG_ROTATE_BYTES // 1000 + 10):
        ours.write(line)
    ours.close()
    theirs.close()
    assert sorted(p.name for p in folder.iterdir()) == ["b.log", "b.log.1"]  # one rotation, not two
    assert path.stat().st_size < LOG_ROTATE_BYTES and "--- started by x" in (folder / "b.log.1").read_text()
