"""Fronts as a host starts them (`emceepee serve` with EMCEEPEE_FLEET=1), driven over their pipes,
and the fleets of a test's emceepee home."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from emceepee_cli import paths, rendezvous
from tests.support import HOSTILE, LineHost, until

STOP_S = 20.0  # a fleet ends its sessions within ~13 s (server/app.py's bounds)
REACHED = re.compile(r"serving through the fleet, pid (\d+) \(session (\w+)\)")
NO_FLEET = "serving in-process (no fleet): "


def fleet_config(path: Path, *extra: str, idle_exit: str = "0") -> Path:
    """A config with one backend, `h` (tests/backends/hostile.py), whose fleet leaves with its last host."""
    lines = [
        "[fleet]",
        f"idle_exit = {json.dumps(idle_exit)}",
        "[servers.h]",
        f"command = {json.dumps(sys.executable)}",
        f"args = [{json.dumps(str(HOSTILE))}]",
        *extra,
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def script_server(name: str, script: Path, *lines: str) -> list[str]:
    """A [servers.NAME] table running `script` with this Python, for fleet_config's extra lines."""
    return [
        f"[servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = [{json.dumps(str(script))}]",
        *lines,
    ]


def place_of(config: Path) -> rendezvous.Place:
    """Where the fleet of this config (and this home's journal) lives, as a front works it out."""
    return rendezvous.place(config.absolute(), paths.db_path().absolute())


def fleets_of(home: Path) -> list[int]:
    """The pids of the fleets living under this emceepee home."""
    found = []
    for lock in (home / "run").glob("*.live.lock"):
        where = rendezvous.Place(lock.parent, lock.name.removesuffix(".live.lock"))
        pid = rendezvous.live_pid(where)
        if pid is not None:
            found.append(pid)
    return found


@dataclass
class Front:
    """One front process and a host on its pipes; what it says on stderr is in a file."""

    host: LineHost
    process: anyio.abc.Process
    stderr: Path

    @property
    def said(self) -> str:
        return self.stderr.read_text()

    async def reached(self) -> tuple[int, str]:
        """The fleet pid and session it says it reached (the caller bounds the wait)."""
        await until(lambda: REACHED.search(self.said) is not None)
        found = REACHED.search(self.said)
        assert found is not None
        return int(found.group(1)), found.group(2)

    async def call(self, tool: str, **args: Any) -> str:
        """A tool of backend `h`, called through execute_tool; its text (an error fails the test)."""
        result = await self.host.tool("execute_tool", {"server": "h", "tool": tool, "args": args})
        assert not result.get("isError"), result
        return str(result["content"][0]["text"])


@asynccontextmanager
async def front(
    config: Path,
    stderr: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    prefix: Sequence[str] = (),
    python_flags: Sequence[str] = (),
    fleet: str | None = "1",
    initialized: bool = True,
    serve_args: Sequence[str] = (),
    host: Callable[[anyio.abc.Process], LineHost] = LineHost,
    capabilities: dict[str, Any] | None = None,
) -> AsyncIterator[Front]:
    """A front (`serve` with EMCEEPEE_FLEET=`fleet`, and `serve_args`) with a `host` on its pipes,
    initialized unless the test does it; at the end its stdin is closed and it is waited for (the
    caller bounds the wait). With `capabilities` the host declares them and keeps what the fleet
    asks it (`AskedHost`)."""
    environ = {**os.environ, **(env or {})}
    # The package this test imports, whatever the front's cwd (a checkout beside an installed copy):
    # its place is in the fleet's socket name, which the test works out too (`place_of`).
    here = str(rendezvous.PACKAGE.parent)
    environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [environ.get("PYTHONPATH")])])
    if fleet is not None:
        environ["EMCEEPEE_FLEET"] = fleet
    else:  # as a user's host starts it: nobody says
        environ.pop("EMCEEPEE_FLEET", None)
    argv = [
        *prefix,
        *(sys.executable, *python_flags, "-m", "emceepee_cli", "serve", "--config", str(config)),
        *serve_args,
    ]
    with stderr.open("wb") as err:
        process = await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=environ, cwd=cwd
        )
    async with process, anyio.create_task_group() as tg:
        wired = host(process) if capabilities is None else AskedHost(process, capabilities)
        tg.start_soon(wired.read)
        if initialized:
            await wired.initialize()
        yield Front(wired, process, stderr)
        assert process.stdin is not None
        await process.stdin.aclose()
        await process.wait()


class AskedHost(LineHost):
    """A host that declares `capabilities` and keeps every request the fleet sends it (elicitation,
    sampling), to answer when the test chooses."""

    def __init__(self, process: anyio.abc.Process, capabilities: dict[str, Any]) -> None:
        super().__init__(process)
        self.capabilities = capabilities
        self.asked: list[dict[str, Any]] = []
        self._asked = anyio.Event()

    async def initialize(self) -> None:
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": self.capabilities,
                "clientInfo": {"name": "asked-host", "version": "0"},
            },
        )
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _deliver(self, line: bytes) -> None:
        if b'"method"' in line[:300]:
            doc = json.loads(line)
            if isinstance(doc, dict) and "id" in doc and "method" in doc:
                self.asked.append(doc)
                self._asked.set()
                return
        super()._deliver(line)

    async def question(self) -> dict[str, Any]:
        """The next request the fleet sent this host (the caller bounds the wait)."""
        while not self.asked:
            self._asked = anyio.Event()
            await self._asked.wait()
        return self.asked.pop(0)

    async def answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        await self.write({"jsonrpc": "2.0", "id": request["id"], "result": result})


@contextmanager
def home_of_another_user_in_reach() -> Iterator[Path]:
    """An emceepee home under /tmp that user 65534 may walk (set as EMCEEPEE_HOME meanwhile by the
    caller), removed at the end: a socket in it can be offered to another user."""
    home = Path(tempfile.mkdtemp(prefix="emceepee-", dir="/tmp"))
    home.chmod(0o711)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def open_to_everyone(where: rendezvous.Place) -> Iterator[None]:
    """The fleet's folder and socket opened to every user for a while: only the fleet's own peer
    check is left to refuse another user."""
    where.folder.chmod(0o711)
    where.sock.chmod(0o666)
    try:
        yield
    finally:
        where.sock.chmod(0o600)
        where.folder.chmod(0o700)


def as_nobody(where: rendezvous.Place, line: bytes) -> bytes:
    """What the fleet answers `line` from user 65534 (a process that becomes it once started)."""
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10)\n"
        "s.connect(sys.argv[1])\n"
        "try:\n"
        "    s.sendall(sys.argv[2].encode())\n"
        "    sys.stdout.buffer.write(s.recv(4096))\n"
        "except (BrokenPipeError, ConnectionResetError):  # closed before reading the line\n"
        "    pass\n"
    )
    assert len(str(where.sock)) <= rendezvous.SUN_PATH_MAX
    argv = [sys.executable, "-c", probe, str(where.sock), line.decode()]
    done = subprocess.run(argv, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout
