"""The fleet itself (`emceepee fleet run`), over real processes: one per place, hellos it refuses,
peers of another user, a socket path too long for AF_UNIX, its idle exit and its stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from emceepee_cli import __version__, paths, rendezvous
from emceepee_cli.fleet.hello import Hello
from tests.fleet.fronts import (
    as_nobody,
    fleet_config,
    fleets_of,
    front,
    home_of_another_user_in_reach,
    open_to_everyone,
    place_of,
)
from tests.support import alive, run_cli, until

pytestmark = pytest.mark.anyio
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user (needs root)")


def _hello(config: Path) -> Hello:
    return Hello(
        version=__version__,
        front_pid=os.getpid(),
        cwd=os.getcwd(),
        env={"PATH": os.environ["PATH"]},
        config=str(config.absolute()),
        db=str(paths.db_path().absolute()),
    )


@contextmanager
def _connected(where: rendezvous.Place) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, rendezvous.address(where) as at:
        sock.settimeout(10)
        sock.connect(at)
        yield sock


def _answer(where: rendezvous.Place, line: bytes) -> bytes:
    """What the fleet answers a connection whose first line is `line` (b"" when it just closes)."""
    with _connected(where) as sock:
        sock.sendall(line)
        answer = b""
        while not answer.endswith(b"\n") and (chunk := sock.recv(4096)):
            answer += chunk
        return answer


async def test_the_fleet_refuses_a_hello_of_another_version_or_files_or_shape(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    hello = _hello(config)
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            await a.reached()
            older = _answer(where, replace(hello, version="0.0.1").line())
            other = _answer(where, replace(hello, config=str(tmp_path / "other.toml")).line())
            garbage = _answer(where, b"GET / HTTP/1.1\n")
            unparsed = _answer(where, b'{"emceepee_front": 1, "front": {"pid": "x"}}\n')
            deep = _answer(where, b"[" * 100_000 + b"\n")
            welcome = json.loads(_answer(where, hello.line()))
            assert await a.call("echo", text="unharmed") == "unharmed"
    assert json.loads(older)["refused"] == f"this fleet runs emceepee {__version__}, the front 0.0.1"
    assert json.loads(other)["refused"].startswith(f"this fleet serves {config.absolute()}")
    assert json.loads(garbage)["refused"].startswith("not a hello: ")
    assert json.loads(unparsed)["refused"] == "not a hello: its 'front' has no pid"
    assert json.loads(deep)["refused"].startswith("not a hello: ")
    assert set(welcome) == {"session", "pid"}


@as_root
async def test_the_fleet_refuses_a_peer_of_another_user(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with home_of_another_user_in_reach() as home:
        monkeypatch.setenv("EMCEEPEE_HOME", str(home))
        config = fleet_config(tmp_path / "config.toml")
        where = place_of(config)
        with anyio.fail_after(60):
            async with front(config, tmp_path / "a.err") as a:
                await a.reached()
                with open_to_everyone(where):
                    stranger = await anyio.to_thread.run_sync(as_nobody, where, _hello(config).line())
                assert await a.call("echo", text="unharmed") == "unharmed"
        log = (home / "data" / "logs" / "fleet.log").read_text()
    assert stranger == b""  # closed without a word
    assert "refused a connection: the front on the fleet's socket runs as user 65534" in log


def _fleet_log(tmp_path: Path) -> str:
    return (tmp_path / "emceepee-home" / "data" / "logs" / "fleet.log").read_text()


async def test_a_second_fleet_for_the_same_files_leaves_at_once(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            second = await anyio.to_thread.run_sync(lambda: run_cli("fleet", "run", "--config", str(config)))
            assert await a.call("echo", text="unharmed") == "unharmed"
    assert second.returncode == 0, second.stderr
    assert f"another fleet (pid {fleet}) serves" in second.stderr


async def test_a_socket_path_longer_than_a_unix_socket_allows_is_reached_through_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / ("deep" * 20) / "emceepee-home"
    monkeypatch.setenv("EMCEEPEE_HOME", str(home))
    config = fleet_config(tmp_path / "config.toml")
    where = place_of(config)
    assert len(str(where.sock)) > rendezvous.SUN_PATH_MAX
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            assert await a.call("echo", text="far") == "far"
            assert where.sock.is_socket()
        await until(lambda: not alive(fleet))


async def test_a_fleet_run_by_hand_serves_fronts_and_leaves_after_its_idle_exit(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="1s")
    argv = [sys.executable, "-m", "emceepee_cli", "fleet", "run", "--config", str(config)]
    with anyio.fail_after(60):
        async with await anyio.open_process(argv, stderr=subprocess.PIPE) as fleet:
            await until(lambda: place_of(config).sock.exists())
            for name in ("a", "b"):  # one after the other: the fleet stays between them (1 s)
                async with front(config, tmp_path / f"{name}.err") as host:
                    assert (await host.reached())[0] == fleet.pid
                    assert await host.call("echo", text=name) == name
            assert await fleet.wait() == 0
            assert fleet.stderr is not None
            said = b"".join([chunk async for chunk in fleet.stderr]).decode()
    assert "no host for 1s ([fleet] idle_exit): leaving" in said
    assert not place_of(config).sock.exists()


async def test_sigterm_to_the_fleet_ends_every_session_and_its_backends_and_the_hosts_go_on_with_a_new_one(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml", idle_exit="10m")
    with anyio.fail_after(60):
        async with front(config, tmp_path / "a.err") as a, front(config, tmp_path / "b.err") as b:
            fleet, _ = await a.reached()
            backends = [int(await a.call("pid")), int(await b.call("pid"))]
            os.kill(fleet, signal.SIGTERM)
            await until(lambda: not alive(fleet))
            assert not any(alive(pid) for pid in backends)
            assert {int(await a.call("pid")), int(await b.call("pid"))}.isdisjoint(backends)
            (new_fleet,) = fleets_of(tmp_path / "emceepee-home")
    assert new_fleet != fleet and place_of(config).sock.exists()
    assert "the fleet closed this host's connection" in a.said and "serving through a new fleet" in b.said
