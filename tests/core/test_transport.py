"""The pipes to a stdio backend, alone: a real child process, its lines each way, and its stop."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from emceepee_cli.backends import transport
from emceepee_cli.backends.logfile import LogPlace
from emceepee_cli.errors import BackendError
from tests.support import alive

pytestmark = pytest.mark.anyio

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"

# Echoes each JSON-RPC line it reads back as a response; says one line on stderr, one not-JSON on stdout.
ECHO = """
import json, sys
sys.stderr.write("started\\n" + "x" * 10000 + "\\n"); sys.stderr.flush()
print("not json", flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"echo": msg["method"]}}), flush=True)
"""
# Ignores stdin's end and SIGTERM: only SIGKILL stops it.
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", file=sys.stderr, flush=True)
time.sleep(3600)
"""


async def test_lines_go_each_way_stderr_is_kept_cut_and_the_process_ends_with_stdin(tmp_path: Path) -> None:
    heard: list[str] = []
    log = tmp_path / "logs" / "b.log"
    opened = transport.open_stdio(
        sys.executable, ["-c", ECHO], env=dict(os.environ), stderr_log=LogPlace(log), on_stderr=heard.append
    )
    with anyio.fail_after(20):
        async with opened as (read, write, info):
            garbage = await read.receive()
            request = types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/list")
            await write.send(SessionMessage(request))
            answer = await read.receive()
    assert isinstance(garbage, ValueError) and "not JSON-RPC" in str(garbage)
    assert isinstance(answer, SessionMessage) and isinstance(answer.message, types.JSONRPCResponse)
    assert answer.message.id == 7 and answer.message.result == {"echo": "tools/list"}
    assert heard[0] == "started" and heard[1].endswith(
        f"[cut: line longer than {transport.STDERR_LINE_BYTES} bytes]"
    )
    assert info.returncode == 0 and info.describe_exit() == "exit code 0 once emceepee closed its stdin"
    assert not alive(info.pid)
    marker, first = log.read_text().splitlines()[:2]  # each line stamped; each start marked
    assert re.fullmatch(rf"{STAMP} --- started by emceepee serve \(pid {os.getpid()}\) ---", marker)
    assert re.fullmatch(rf"{STAMP} started", first)


async def test_a_backend_that_ignores_stdin_and_sigterm_is_killed_within_the_bound() -> None:
    ready = anyio.Event()

    def on_stderr(line: str) -> None:
        if line == "ready":
            ready.set()

    started = anyio.current_time()
    with anyio.fail_after(20):
        async with transport.open_stdio(
            sys.executable, ["-c", STUBBORN], env=dict(os.environ), on_stderr=on_stderr
        ) as (
            _,
            _,
            info,
        ):
            await ready.wait()
            pid = info.pid
    assert anyio.current_time() - started < transport.STOP_BOUND_S + 10
    assert info.describe_exit() == "killed by emceepee with SIGKILL" and not alive(pid)


def test_a_command_only_on_emceepees_own_path_is_named_with_its_full_path(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as missing:
        transport.resolve_command("sh", {"PATH": str(tmp_path)})
    assert f"(the backend's PATH: {tmp_path})" in missing.value.message
    assert missing.value.hint is not None
    assert missing.value.hint.startswith(f"It is at {shutil.which('sh')} on emceepee's own PATH")


async def test_a_command_not_on_path_or_a_missing_cwd_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as missing:
        transport.resolve_command("emceepee-no-such-command", {"PATH": str(tmp_path)})
    with pytest.raises(BackendError) as no_cwd:
        async with transport.open_stdio(
            sys.executable, ["-c", "pass"], env=dict(os.environ), cwd=str(tmp_path / "gone")
        ):
            pass
    assert missing.value.message == (
        f"Command 'emceepee-no-such-command' was not found on PATH (the backend's PATH: {tmp_path})"
    )
    assert "Working directory" in no_cwd.value.message and no_cwd.value.hint == "Fix the server's `cwd`."
