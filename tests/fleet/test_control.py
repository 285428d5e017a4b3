"""The command line and the fleet, over real processes: `fleet status` and `fleet stop`, `doctor`'s
fleet section, `answer` poking the fleet, and control requests the fleet refuses."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import __version__, paths, rendezvous
from emceepee_cli.fleet.hello import HELLO_MAX_BYTES
from tests.fleet.fronts import (
    as_nobody,
    fleet_config,
    fleets_of,
    front,
    home_of_another_user_in_reach,
    open_to_everyone,
    place_of,
)
from tests.support import alive, example_table, run_cli, until, write_config

pytestmark = pytest.mark.anyio
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user (needs root)")

STATUS_KEYS = {
    "pid",
    "version",
    "started",
    "uptime_s",
    "socket",
    "config",
    "db",
    "rss_mb",
    "idle_exit_s",
    "hosts",
    "backends",
}
ON = {"EMCEEPEE_FLEET": "1"}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, **(env or {})})


async def _in_thread(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: _cli(*args, env=env))


def _answer(where: rendezvous.Place, line: bytes) -> dict[str, Any]:
    """The fleet's answer to a connection whose first line is `line` (the fleet may stop reading a
    line too long before it has all of it: its answer is read all the same)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, rendezvous.address(where) as at:
        sock.settimeout(10)
        sock.connect(at)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(line)
        answer = b""
        while not answer.endswith(b"\n") and (chunk := sock.recv(4096)):
            answer += chunk
    doc: dict[str, Any] = json.loads(answer)
    return doc


def _control(op: str, version: str = __version__, protocol: object = 1) -> bytes:
    return json.dumps({"emceepee_control": protocol, "op": op, "version": version}).encode() + b"\n"


async def test_fleet_status_json_shape_is_pinned(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="10m")
    project = tmp_path / "project"
    project.mkdir()
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", cwd=project) as a:
            fleet, session = await a.reached()
            assert await a.call("echo", text="seen") == "seen"  # the host's name is known by now
            done = await _in_thread("fleet", "status", "--json", "--config", str(config))
            shown = await _in_thread("fleet", "status", "--config", str(config))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"fleet", "socket", "on", "said_by"}
    assert (out["socket"], out["on"], out["said_by"]) == (
        str(place_of(config).sock),
        False,
        "EMCEEPEE_FLEET=0",
    )
    status = out["fleet"]
    assert set(status) == STATUS_KEYS
    assert (status["pid"], status["version"], status["socket"]) == (fleet, __version__, out["socket"])
    assert status["config"] == str(config.absolute()) and status["db"] == str(paths.db_path().absolute())
    assert status["idle_exit_s"] == 600.0
    [backend] = status["backends"]
    assert set(backend) == {"server", "key", "pid", "status", "hosts", "shared", "rss_mb"}
    assert (backend["server"], backend["status"], backend["hosts"], backend["shared"]) == (
        "h",
        "ready",
        [session],
        True,
    )
    assert backend["key"].startswith("h@") and backend["pid"] > 0 and 0 < backend["rss_mb"] < 1024
    assert 0 < status["rss_mb"] < 1024 and status["uptime_s"] >= 0
    [host] = status["hosts"]
    assert host == {
        "session": session,
        "front_pid": a.process.pid,
        "cwd": str(project),
        "since": host["since"],
        "client": {"name": "test-host", "version": "0"},
    }
    assert host["since"] >= status["started"]
    assert shown.returncode == 0, shown.stderr
    assert f"pid {fleet}, emceepee {__version__}" in shown.stdout
    assert session in shown.stdout and f"test-host ({session[-6:]})" in shown.stdout
    assert "10m after its last host leaves" in shown.stdout and backend["key"] in shown.stdout


async def test_fleet_status_and_stop_without_a_fleet_say_so_and_exit_0(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    status = await _in_thread("fleet", "status", "--config", str(config))
    on = await _in_thread("fleet", "status", "--json", "--config", str(config), env=ON)
    unsaid = await anyio.to_thread.run_sync(
        lambda: run_cli("fleet", "status", "--json", "--config", str(config), env=_without_switch())
    )
    stop = await _in_thread("fleet", "stop", "--config", str(config))
    assert status.returncode == 0 and on.returncode == 0 and stop.returncode == 0, status.stderr
    assert f"No fleet runs for this config ({config.absolute()})." in status.stdout
    assert "The fleet is off (EMCEEPEE_FLEET=0)" in status.stderr
    assert json.loads(unsaid.stdout)["said_by"] == "the default" and json.loads(unsaid.stdout)["on"]
    assert json.loads(on.stdout) == {
        "fleet": None,
        "socket": str(place_of(config).sock),
        "on": True,
        "said_by": "EMCEEPEE_FLEET=1",
    }
    assert "nothing to stop" in stop.stdout
    assert not place_of(config).sock.exists()  # neither started one


async def test_fleet_stop_stops_it_and_a_front_starts_another(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="10m")
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            backend = int(await a.call("pid"))
            stopped = await _in_thread("fleet", "stop", "--config", str(config))
            assert not alive(fleet)  # `stop` waited for it
            await until(lambda: not alive(backend))
            assert await a.call("echo", text="again") == "again"  # through a new fleet
            [second] = fleets_of(tmp_path / "emceepee-home")
            again = await _in_thread("fleet", "stop", "--json", "--config", str(config))
    assert stopped.returncode == 0, stopped.stderr
    assert f"Stopped the fleet (pid {fleet})." in stopped.stdout
    assert "1 host(s) were connected" in stopped.stdout and "starts a new fleet" in stopped.stdout
    assert second != fleet
    assert json.loads(again.stdout) == {"stopped": second, "hosts": 1}
    assert not alive(second)


async def test_the_fleet_refuses_control_requests_of_another_version_or_shape_and_goes_on(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    huge = b'{"emceepee_control": 1, "op": "' + b"x" * (2 * HELLO_MAX_BYTES) + b'"}\n'
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            older = _answer(where, _control("stop", version="0.0.1"))
            unknown = _answer(where, _control("explode"))
            protocol = _answer(where, _control("status", protocol=2))
            unversioned = _answer(where, b'{"emceepee_control": 1, "op": "stop", "version": 5}\n')
            garbage = _answer(where, b'{"emceepee_control": [}\n')
            too_long = await anyio.to_thread.run_sync(_answer, where, huge)
            assert alive(fleet) and await a.call("echo", text="unharmed") == "unharmed"
            poked = _answer(where, _control("poke"))
    assert older == {"refused": f"this fleet runs emceepee {__version__}, the command 0.0.1"}
    assert unknown == {"refused": "not a hello: its op 'explode' is none of status, stop, poke"}
    assert protocol == {"refused": "not a hello: not a control request of protocol 1"}
    assert unversioned == {"refused": "not a hello: its 'version' is not a string"}
    assert garbage["refused"].startswith("not a hello: ")
    assert too_long == {"refused": f"not a hello: longer than {HELLO_MAX_BYTES} bytes"}
    assert poked["poked"] >= 1  # the host's session's watcher


@as_root
async def test_the_fleet_refuses_a_control_request_of_another_user(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with home_of_another_user_in_reach() as home:
        monkeypatch.setenv("EMCEEPEE_HOME", str(home))
        config = fleet_config(tmp_path / "config.toml")
        where = place_of(config)
        with anyio.fail_after(60):
            async with front(config, tmp_path / "a.err") as a:
                fleet, _ = await a.reached()
                with open_to_everyone(where):
                    stranger = await anyio.to_thread.run_sync(as_nobody, where, _control("stop"))
                assert alive(fleet) and await a.call("echo", text="unharmed") == "unharmed"
    assert stranger == b""  # closed without a word


def _fleet_checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(done.stdout)["checks"] if c["area"] == "fleet"}


async def test_doctor_reports_the_fleet(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="10m")
    where = place_of(config)
    doctor = ("doctor", "--no-backends", "--json", "--config", str(config))
    with anyio.fail_after(90):
        off = _fleet_checks(await _in_thread(*doctor))
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            assert await a.call("echo", text="seen") == "seen"
            older = rendezvous.Place(where.folder, "fleet-0.0.1-0123456789abcdef")
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, rendezvous.address(older) as at:
                sock.bind(at)  # an older emceepee's fleet's socket; that fleet is gone
            older.sock.chmod(0o600)
            on = _fleet_checks(await _in_thread(*doctor, env=ON))
            where.folder.chmod(0o755)
            try:
                loose = await _in_thread(*doctor, env=ON)
            finally:
                where.folder.chmod(0o700)
    assert off["switch"]["state"] == "note" and off["switch"]["detail"].startswith("off (EMCEEPEE_FLEET=0)")
    assert off[str(where.folder)]["state"] == "note"  # not made yet
    assert on["switch"] == {
        "area": "fleet",
        "name": "switch",
        "state": "ok",
        "detail": "on (EMCEEPEE_FLEET=1): each host's serve relays to the fleet",
    }
    assert on[str(where.folder)]["state"] == "ok"
    assert on["fleet"]["state"] == "ok"
    assert on["fleet"]["detail"].startswith(f"pid {fleet}, emceepee {__version__}, up ")
    assert on["fleet"]["detail"].endswith("1 host(s) connected: test-host")
    stale = on[older.sock.name]
    assert stale["state"] == "note" and "stale socket of emceepee 0.0.1's fleet" in stale["detail"]
    assert stale["fix"] == f"rm {older.sock}"
    assert loose.returncode == 1
    refused = _fleet_checks(loose)[str(where.folder)]
    assert refused["state"] == "fail" and "is open to other users (mode 755)" in refused["detail"]
    assert refused["fix"] == f"chmod 700 {where.folder}"


async def test_paths_shows_the_runtime_folder(tmp_path: Path) -> None:
    done = await _in_thread("paths", "--json")
    assert json.loads(done.stdout)["paths"]["runtime"] == str(tmp_path / "emceepee-home" / "run")


async def test_answer_reaches_the_waiting_backend_through_the_fleet_at_once(tmp_path: Path) -> None:
    record = tmp_path / "backend.log"
    config = write_config(
        tmp_path / "config.toml",
        '[fleet]\nidle_exit = "0"\n',
        example_table("elicit", "elicit.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
    )
    slow = {"EMCEEPEE_WATCH_INTERVAL_S": "120"}  # the fleet's watchers tick every 2 minutes
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err", env=slow) as a:
            await a.reached()
            asked = await a.host.tool(
                "execute_tool",
                {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}, "timeout_ms": 30_000},
            )
            request_id = asked["structuredContent"]["saga"]["steps"][0]["step_id"]
            done = await _in_thread("answer", request_id, "--content", '{"name": "Cli"}')
            answered = time.monotonic()
            with anyio.fail_after(20):  # well before the watcher's next tick
                await until(lambda: record.exists() and "answer " in record.read_text())
            heard_after = time.monotonic() - answered
    assert done.returncode == 0, done.stderr
    assert '"content": {"name": "Cli"}' in record.read_text()
    assert heard_after < 20


async def test_status_requests_neither_keep_the_fleet_past_its_idle_exit_nor_end_it_early(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="2s")
    where = place_of(config)
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            assert await a.call("echo", text="hi") == "hi"
        asked = 0
        while alive(fleet):  # asked without pause: each request used to start the countdown again
            try:
                await anyio.to_thread.run_sync(_answer, where, _control("status"))
            except OSError:  # it has removed its socket: leaving
                continue
            asked += 1
    assert asked > 1


def _without_switch() -> dict[str, str]:
    """The environment as a user's terminal has it: nobody says whether the fleet is on."""
    return {k: v for k, v in os.environ.items() if k != "EMCEEPEE_FLEET"}
