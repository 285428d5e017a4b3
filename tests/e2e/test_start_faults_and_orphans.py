"""Start-up on a data folder serve cannot write, over the real `emceepee serve` process: a fresh
install whose data folder is read-only gets answers from memory, every reply says which folder and
the command that fixes it, and nothing is written there (no logs folder, no key, no spool file, no
journal).

The read-only folder binds emceepee as it binds a user on their own 0500 folder: as root (these
tests often run as root), serve runs behind tests/support.py's AS_OWNER_PREFIX.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli.core.spool import BUDGET_ENV
from tests.e2e import test_journal_faults as journal_faults
from tests.e2e.test_journal_start_faults import call
from tests.support import (
    AS_OWNER_PREFIX,
    example_table,
    serve_command,
    write_config,
)

pytestmark = pytest.mark.anyio


async def test_a_fresh_install_whose_data_folder_is_read_only_serves_from_memory_and_says_how_to_fix_it(
    tmp_path: Path, emceepee_home: Path
) -> None:
    data = emceepee_home / "data"
    data.mkdir(parents=True)
    data.chmod(0o500)  # exists, empty, and this user cannot write it: no logs/, key, spool or journal yet
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    env = {**os.environ, BUDGET_ENV: "0"}  # every backend result would go to a spool file in there
    flags: list[dict[str, Any]] = []
    try:
        async with journal_faults.serve(config, env, [*AS_OWNER_PREFIX, *serve_command(config)]) as run:
            with anyio.fail_after(60):
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
                flags.append(flag)
                while True:  # the backend starts in the background: list until its tools are there
                    tools, flag = await call(run, "list_tools", {"server": "echo"})
                    flags.append(flag)
                    [group] = tools["structuredContent"]["servers"]
                    assert group["status"] != "failed", (group, run.log)
                    if "tools" in group:
                        break
                echoed, flag = await call(
                    run, "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}}
                )
                flags.append(flag)
            code = await run.stop()
        left = sorted(p.name for p in data.iterdir())
    finally:
        data.chmod(0o700)

    assert init["serverInfo"]["name"] == "emceepee"
    assert "list_servers" in {tool["name"] for tool in listed["tools"]}
    assert [s["name"] for s in servers["structuredContent"]["servers"]] == ["echo"]
    assert echoed["content"][0]["text"] == "hi" and not echoed.get("isError"), echoed
    for flag in flags:  # every reply names the folder and the command that fixes it
        assert flag == flags[0]
        assert f"its folder {data} is not writable" in flag["message"], flag
        assert flag["hint"].startswith(f"chmod u+w {data} ("), flag
    assert code == 0, run.log
    assert "Traceback" not in run.log, run.log
    assert f"the backends' stderr logs {data / 'logs'}" in run.log and f"chmod u+w {data}" in run.log
    assert "The install key" in run.log and "signs its tokens with a key of its own" in run.log
    assert left == []  # nothing was written there
