"""An expanded `${VAR}` never leaves `emceepee serve`: not in a reply, a log line, a log file, the journal."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import HOSTILE, RawHost, hostile_table, serve_command, write_config

pytestmark = pytest.mark.anyio

VAR = "EMCEEPEE_TEST_SECRET"
SECRET = "S3cr3t-" + os.urandom(6).hex()
FORM = "${" + VAR + "}"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def secret_config(tmp_path: Path) -> Path:
    url = f"http://127.0.0.1:{closed_port()}/{FORM}/mcp"
    return write_config(
        tmp_path / "config.toml",
        '[defaults]\nmodel_adds_servers = "allow"\n',  # the model's add_server runs at once
        # cwd: a missing working directory is quoted in the error.
        hostile_table("in_cwd", cwd=str(tmp_path / FORM / "nowhere")),
        # url and headers: nothing listens there.
        f"[servers.in_url]\nurl = {json.dumps(url)}\n"
        f"headers = {{ Authorization = {json.dumps('Bearer ' + FORM)} }}\n",
        # env: the backend prints its environment variable to stderr, and keeps running.
        hostile_table("in_env", "--say-env", "TOKEN", env={"TOKEN": FORM}),
        # args: the backend echoes an argument to stderr and dies at start (its stderr tail is reported).
        hostile_table("in_args", "--say", f"token={FORM}", "--exit-at-start", "3"),
        # A command that is not there, with the secret in its args and env.
        f'[servers.no_cmd]\ncommand = "emceepee-test-no-such"\nargs = [{json.dumps(FORM)}]\n'
        f"env = {{ T = {json.dumps(FORM)} }}\n",
    )


async def until_every_failure_is_known(host: RawHost) -> list[dict[str, Any]]:
    """list_servers until each server shows what went wrong (the caller bounds the wait)."""
    while True:
        rows = {row["name"]: row for row in (await host.tool("list_servers", {}))["servers"]}
        logs = (await host.tool("get_logs", {"server": "in_env"}))["logs"]
        failures = [rows[name].get("last_error", "") for name in ("in_cwd", "in_url", "in_args", "no_cmd")]
        if all(failures) and "token=" in failures[2] and any("TOKEN=" in entry["message"] for entry in logs):
            return list(rows.values())
        await host.tool("await_activity", {"timeout_ms": 200})


async def test_no_expanded_secret_reaches_a_reply_a_log_or_the_journal(
    tmp_path: Path, emceepee_home: Path
) -> None:
    config = secret_config(tmp_path)
    stderr_path = tmp_path / "serve.stderr"
    replies: list[Any] = []
    with stderr_path.open("wb") as stderr:
        process = await anyio.open_process(
            serve_command(config), env={**os.environ, VAR: SECRET}, stderr=stderr
        )
    try:
        host = RawHost(process)
        with anyio.fail_after(60):
            await host.initialize()
            # Per server: a listing of all would wait for the backends that keep restarting.
            replies.append(await host.tool("list_tools", {"server": "in_env"}))
            rows = await until_every_failure_is_known(host)
            replies.append(rows)
            for name in ("in_cwd", "no_cmd", "in_env"):  # not the restarting ones: a call waits for those
                replies.append(
                    await host.send(
                        "tools/call",
                        {
                            "name": "execute_tool",
                            "arguments": {"server": name, "tool": "echo", "args": {"text": "x"}},
                        },
                    )
                )
            for tool in ("get_logs", "get_notifications", "list_tasks"):
                replies.append(await host.send("tools/call", {"name": tool, "arguments": {}}))
            for tool in ("list_tools", "list_resources"):
                for name in ("in_cwd", "no_cmd"):
                    replies.append(
                        await host.send("tools/call", {"name": tool, "arguments": {"server": name}})
                    )
            replies.append(
                await host.send("tools/call", {"name": "await_activity", "arguments": {"timeout_ms": 0}})
            )
            added = {
                "name": "added",
                "command": sys.executable,
                "args": [str(HOSTILE), "--exit-at-start", "1"],
                "cwd": str(tmp_path / FORM),
                "persist": False,
            }
            replies.append(await host.send("tools/call", {"name": "add_server", "arguments": added}))
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()

    said = json.dumps(replies)
    assert FORM in said  # the failures were reported, in their unexpanded form…
    by_name = {row["name"]: row for row in rows}
    assert f"{FORM}/nowhere' does not exist" in by_name["in_cwd"]["last_error"]
    assert f"token={FORM}" in by_name["in_args"]["last_error"]
    leaks = {"replies": said.encode()} | {
        str(path.relative_to(tmp_path)): path.read_bytes()
        for path in [stderr_path, *tmp_path.rglob("*.log*"), *(emceepee_home / "data").glob("journal.db*")]
    }
    assert len(leaks) == 5, sorted(
        leaks
    )  # replies, stderr, the journal, the logs of the two spawned backends
    assert [where for where, data in leaks.items() if SECRET.encode() in data] == []  # …and never expanded
    assert FORM.encode() in leaks["serve.stderr"]
