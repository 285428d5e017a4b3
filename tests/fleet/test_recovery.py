"""Nothing is lost when the fleet dies: two hosts' calls that were resuming themselves with their
backend's resume tokens, in flight when the fleet is killed, are taken back by each host's new
session (its front names the session it had) and finished there: real fronts, a real fleet
killed with SIGKILL, the real resumable example backend."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import processes
from tests.fleet.fronts import Front, fleet_config, fleets_of, front, script_server
from tests.support import EXAMPLES, alive, until

pytestmark = pytest.mark.anyio
REPLAYED = "this host's handshake replayed"
needs_proc = pytest.mark.skipif(not processes.HAVE_PROC, reason="reads processes through /proc")


async def started_job(host: Front, name: str) -> str:
    """An auto-resumed job of the resumable backend, promoted to a task at once; its task id."""
    args = {"name": name, "polls": 6, "seconds": 0.3}
    result = await host.host.tool(
        "execute_tool", {"server": "resumable", "tool": "job", "args": args, "timeout_ms": 100}
    )
    return str(result["structuredContent"]["proxy_task"]["task_id"])


@needs_proc
async def test_calls_resuming_on_two_hosts_when_the_fleet_is_killed_are_finished_by_their_own_hosts(
    tmp_path: Path,
) -> None:
    record = tmp_path / "resumable.log"
    config = fleet_config(
        tmp_path / "config.toml",
        *script_server("resumable", EXAMPLES / "resumable.py"),
        f"env = {{ EMCEEPEE_EXAMPLE_LOG = {json.dumps(str(record))} }}",
        "auto_resume = true",
        "auto_resume_interval_ms = 1",
    )
    with anyio.fail_after(120):
        async with front(config, tmp_path / "a.err") as a, front(config, tmp_path / "b.err") as b:
            fleet, _ = await a.reached()
            tasks = {"a": await started_job(a, "a"), "b": await started_job(b, "b")}
            await until(lambda: _polls(record) >= 4)  # both are resuming now
            os.kill(fleet, signal.SIGKILL)
            # A request the host sends before its front has noticed the death is answered with an
            # error (a real host calls again): ask once each front has reached the new fleet.
            await until(lambda: all(REPLAYED in host.said for host in (a, b)))
            assert not alive(fleet) and len(fleets_of(tmp_path / "emceepee-home")) == 1
            done: dict[str, Any] = {}
            for name, host in (("a", a), ("b", b)):  # no new initialize: the front replayed it
                wait = {"task_id": tasks[name], "timeout_ms": 40_000}
                done[name] = await host.host.tool("get_task_result", wait)
                got = await host.host.tool("get_task", {"task_id": tasks[name]})
                assert got["structuredContent"]["task"]["status"] == "completed", got
    assert done["a"]["content"][0]["text"] == "job a: ready after 6 polls"
    assert done["b"]["content"][0]["text"] == "job b: ready after 6 polls"
    assert "reaching a new one" in a.said and "reaching a new one" in b.said


def _polls(record: Path) -> int:
    return len(record.read_text().splitlines()) if record.exists() else 0
