"""`emceepee serve` as the front of the fleet (EMCEEPEE_FLEET=1), over real processes: fronts share
one fleet, each host is its own session there, the front loads no SDK, and whatever keeps a front
from the fleet makes it serve in-process, saying so once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
from pathlib import Path

import anyio
import pytest

from emceepee_cli import processes, rendezvous
from tests.fleet.fronts import NO_FLEET, REACHED, fleet_config, fleets_of, front, place_of
from tests.support import AS_OWNER_PREFIX, alive, until

pytestmark = pytest.mark.anyio
needs_proc = pytest.mark.skipif(not processes.HAVE_PROC, reason="reads processes through /proc")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="makes files of another user (needs root)")

SDK_MODULES = ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio", "httpx", "httpx2", "sqlite_utils")
FRONT_RSS_MB = 25.0


def _parent(pid: int) -> int | None:
    found = processes.stat(pid)
    return None if found is None else found.ppid


@needs_proc
async def test_two_fronts_started_at_once_share_one_fleet_and_each_calls_its_backend(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", initialized=False) as a,
            front(config, tmp_path / "b.err", initialized=False) as b,
        ):
            async with anyio.create_task_group() as tg:  # both race to start the fleet
                tg.start_soon(a.host.initialize)
                tg.start_soon(b.host.initialize)
            (fleet, session_a), (fleet_b, session_b) = await a.reached(), await b.reached()
            for host in (a, b):
                listed = await host.host.tool("list_tools", {"server": "h"})
                assert [group["server"] for group in listed["structuredContent"]["servers"]] == ["h"]
            backend_a, backend_b = int(await a.call("pid")), int(await b.call("pid"))
            assert await b.call("echo", text="from b") == "from b"
            assert await a.call("echo", text="from a") == "from a"
            servers = await b.host.tool("list_servers", {})
            assert servers["structuredContent"]["servers"][0]["status"] == "ready"
            assert int(await a.call("pid")) == backend_a and int(await b.call("pid")) == backend_b
            assert fleets_of(tmp_path / "emceepee-home") == [fleet]
            assert _parent(backend_a) == fleet
        await until(lambda: not alive(fleet))  # idle_exit = "0": it leaves with its last host
    assert fleet_b == fleet and session_a != session_b
    assert backend_a == backend_b  # the same process would start: one is shared
    assert not alive(backend_a)
    assert "fleet did not start" not in a.said + b.said


@needs_proc
async def test_a_host_keeps_its_backend_when_another_host_leaves(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            backend_a = int(await a.call("pid"))
            assert _parent(backend_a) == fleet
            async with front(config, tmp_path / "b.err") as b:
                assert (await b.reached())[0] == fleet
                assert int(await b.call("pid")) == backend_a
                assert await b.call("echo", text="from b") == "from b"
            assert alive(backend_a) and alive(fleet)  # b's session ended: a still uses it
            assert await a.call("echo", text="still here") == "still here"
            assert int(await a.call("pid")) == backend_a
        await until(lambda: not alive(fleet))
    assert not alive(backend_a)


@needs_proc
async def test_a_backend_starts_in_its_hosts_cwd_and_environment_which_the_fleet_keeps_out_of_its_own(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = fleet_config(
        tmp_path / "config.toml", 'env = { TOKEN = "${HOST_SECRET}" }', 'pass_env = ["HOST_*"]'
    )
    env = {"HOST_SECRET": "s3cret-of-host-a", "HOST_FLAVOUR": "a"}
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", env=env, cwd=project) as a:
            fleet, _ = await a.reached()
            backend = int(await a.call("pid"))
            seen = _environ(backend)
            assert Path(os.readlink(f"/proc/{backend}/cwd")) == project.resolve()
            assert seen["TOKEN"] == "s3cret-of-host-a" and seen["HOST_FLAVOUR"] == "a"
            assert "HOST_SECRET" not in _environ(fleet) and "s3cret" not in str(_environ(fleet))
    log = (tmp_path / "emceepee-home" / "data" / "logs" / "fleet.log").read_text()
    assert "s3cret" not in log


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)


@needs_proc
async def test_the_front_loads_no_sdk_and_stays_small(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", python_flags=("-X", "importtime")) as a:
            await a.reached()
            assert await a.call("echo", text="light") == "light"
            rss_kb = _rss_kb(a.process.pid)
    imported = {m.group(1).strip() for m in re.finditer(r"^import time:[^|]*\|[^|]*\|\s*(\S+)", a.said, re.M)}
    assert "emceepee_cli.fleet.relay" in imported
    assert not {name for name in imported if name.split(".")[0] in SDK_MODULES}
    assert not {name for name in imported if name.startswith("emceepee_cli.server")}
    assert rss_kb / 1024 < FRONT_RSS_MB


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert found is not None
    return int(found.group(1))


@pytest.mark.parametrize(
    ("switch", "table", "why"),
    [
        ("0", "", "EMCEEPEE_FLEET=0"),
        ("1", "enabled = false", "[fleet] enabled = false in "),
    ],
)
async def test_a_fleet_turned_off_serves_in_process_and_says_so_once(
    tmp_path: Path, switch: str, table: str, why: str
) -> None:
    config = fleet_config(tmp_path / "config.toml")
    config.write_text(config.read_text().replace("[fleet]\n", f"[fleet]\n{table}\n"))
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", fleet=switch) as a:
            assert int(await a.call("pid")) > 0
    assert a.said.count(NO_FLEET) == 1 and f"{NO_FLEET}{why}" in a.said, a.said
    assert "serving through the fleet" not in a.said
    assert fleets_of(tmp_path / "emceepee-home") == []


async def test_serve_goes_through_the_fleet_when_nobody_says_otherwise(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", fleet=None) as a:
            fleet, _ = await a.reached()
            assert _parent(int(await a.call("pid"))) == fleet
    assert NO_FLEET not in a.said


async def test_an_unwritable_runtime_folder_makes_serve_run_in_process_and_say_so_once(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml")
    run = tmp_path / "emceepee-home" / "run"
    run.mkdir(parents=True, mode=0o500)  # private, but this user cannot make the socket or a lock in it
    try:
        with anyio.fail_after(60):
            async with front(config, tmp_path / "a.err", prefix=AS_OWNER_PREFIX) as a:
                assert await a.call("echo", text="in-process") == "in-process"
                assert _parent(int(await a.call("pid"))) in (a.process.pid, None)
    finally:
        run.chmod(0o700)
    assert a.said.count(NO_FLEET) == 1, a.said
    assert "cannot open the fleet's lock" in a.said and f"chmod u+w {run}" in a.said, a.said
    assert fleets_of(tmp_path / "emceepee-home") == []


async def _refused_in_process(tmp_path: Path, config: Path, expected: str) -> str:
    """Serve runs in-process, calls its backend and says once why the fleet was not used."""
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            assert await a.call("echo", text="in-process") == "in-process"
    assert a.said.count(NO_FLEET) == 1 and expected in a.said, a.said
    assert fleets_of(tmp_path / "emceepee-home") == []
    return a.said


async def test_a_runtime_folder_open_to_others_is_refused(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    where.folder.mkdir(parents=True, mode=0o700)
    where.folder.chmod(0o755)
    said = await _refused_in_process(tmp_path, config, f"{where.folder} is open to other users (mode 755)")
    assert f"chmod 700 {where.folder}" in said


async def test_a_socket_open_to_others_is_refused(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    _stale_socket(where).chmod(0o666)
    await _refused_in_process(tmp_path, config, f"{where.sock} is open to other users (mode 666)")
    assert where.sock.exists()  # not ours to remove: a person decides


@as_root
@pytest.mark.parametrize("what", ["socket", "folder"])
async def test_a_socket_or_folder_of_another_user_is_refused(tmp_path: Path, what: str) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    sock = _stale_socket(where)
    owned = sock if what == "socket" else where.folder
    os.chown(owned, 65534, 65534)
    await _refused_in_process(tmp_path, config, f"{owned} belongs to user 65534, not to this user (0)")


async def test_a_stale_socket_is_replaced_by_a_new_fleet(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    stale = _stale_socket(where).stat().st_ino
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            assert await a.call("echo", text="fresh") == "fresh"
            assert where.sock.stat().st_ino != stale
        await until(lambda: not alive(fleet))
    assert NO_FLEET not in a.said


def _stale_socket(where: rendezvous.Place) -> Path:
    """A socket file at the fleet's place that nobody listens on (its fleet died), mode 0600."""
    rendezvous.prepare(where)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, rendezvous.address(where) as at:
        sock.bind(at)
    where.sock.chmod(0o600)
    return where.sock


async def test_sigterm_to_a_front_ends_its_session_and_the_front_exits_0(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            backend = int(await a.call("pid"))
            a.process.send_signal(signal.SIGTERM)
            assert await a.process.wait() == 0
            await until(lambda: not alive(backend))
        await until(lambda: not alive(fleet))


async def test_a_host_that_writes_its_requests_and_closes_stdin_at_once_gets_every_answer(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml")
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "0"}}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "list_servers", "arguments": {}},
        },
    ]
    given, got = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    given.write_text("".join(json.dumps(r) + "\n" for r in requests) + "not json\n")
    argv = [sys.executable, "-m", "emceepee_cli", "serve", "--config", str(config)]
    with given.open("rb") as stdin, got.open("wb") as stdout, anyio.fail_after(60):
        done = await anyio.run_process(
            argv, stdin=stdin, stdout=stdout, check=False, env={**os.environ, "EMCEEPEE_FLEET": "1"}
        )
    answers = {a.get("id"): a for a in map(json.loads, got.read_text().splitlines())}
    assert done.returncode == 0, done.stderr
    assert sorted(answers, key=str) == [1, 2, 3, None]
    assert "execute_tool" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert REACHED.search(done.stderr.decode())
