"""Reaching the fleet from a front: connect to it, or start one under the start lock and connect.

`connect_or_start`:

1. When the socket exists (and passes `rendezvous.check_socket`), connect, check that the peer runs
   as this user, send the hello and read the answer (fleet/hello.py). A welcome is the connection.
   Nobody listening, or the connection closed before an answer (a fleet leaving at its idle exit,
   which holds the start lock meanwhile): go on.
2. Under the start lock: connect again (another front may have just started one). Else, when no
   fleet holds the live lock, the socket is stale: remove it, start a fleet and wait for the
   `ready` line it writes once it listens (at most `FLEET_START_S`); then back to 1, once.

Anything unsafe (a folder or socket another user could use, a peer of another user), a refusal
from the fleet, or a fleet that does not start twice is `rendezvous.Refused`: the front then serves
in-process.

Starting is `python -m emceepee_cli fleet run --detach --ready-fd N`, in a session of its own,
its stdio to the fleet's log file in the logs folder, with an environment cut to what the fleet
itself needs (`fleet_env`; the host's secrets reach only that host's backends, through the hello).
`--detach` forks once more at once (`detach`): the fleet is then nobody's child, so no zombie is
left under the front and no kill of the host's process tree reaches it; the front reaps the
intermediate process.

The standard library only (and paths, rendezvous): the front imports this.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from emceepee_cli import paths, rendezvous
from emceepee_cli.fleet.hello import Hello, Welcome, parse_answer, read_answer
from emceepee_cli.rendezvous import Place, Refused

FLEET_START_S = 20.0  # from the spawn to its `ready` line: imports the SDK; a loaded machine is slow
ANSWER_S = 10.0  # the fleet answers a hello before it builds anything
CONNECT_S = 5.0
LEAVING_S = 15.0  # a fleet that stopped listening ends its sessions (bounded: server/app.py) and exits
LEAVING_POLL_S = 0.05
LOG_ROTATE_BYTES = 4 * 1024 * 1024  # the fleet's log is moved aside (one backup) past this, at a start
# What the fleet's own environment keeps of the front's: what Python and emceepee need to run, and
# none of a host's values. Each host's variables (its secrets, proxies, CA, display, `$BROWSER`)
# reach only what is started or reached for that host, through its hello (backends/launch.py).
FLEET_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
)
FLEET_ENV_PREFIXES = ("LC_", "XDG_", "EMCEEPEE_", "PYTHON")


@dataclass
class Connection:
    """A connection to the fleet that has welcomed this host: from now on, its MCP session."""

    sock: socket.socket
    welcome: Welcome


def connect_or_start(where: Place, hello: Hello) -> Connection:
    """A welcomed connection to the fleet of `where`, started if none runs; else `Refused`."""
    rendezvous.prepare(where)
    for _ in range(2):
        found = attempt(where, hello)
        if found is not None:
            return found
        with rendezvous.start_lock(where):
            found = attempt(where, hello)
            if found is not None:
                return found
            _until_gone(where)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where.sock)  # stale: its fleet is gone (checked as ours by `prepare`)
            start(where, hello)
    raise Refused(f"the fleet did not start; its log: {fleet_log()}")


def _until_gone(where: Place) -> None:
    """Wait (at most `LEAVING_S`) for a fleet that holds the live lock but does not answer: it is
    leaving (it removed its socket first). One still there after that is stuck: `Refused`."""
    deadline = time.monotonic() + LEAVING_S
    while (pid := rendezvous.live_pid(where)) is not None:
        if time.monotonic() >= deadline:
            raise Refused(
                f"a fleet (pid {pid}) holds {where.live_lock} but does not answer on {where.sock}. "
                f"To fix: kill {pid}"
            )
        time.sleep(LEAVING_POLL_S)


def attempt(where: Place, hello: Hello) -> Connection | None:
    """The fleet's welcome on a new connection; None when nobody listens, or it closed before
    answering (a fleet leaving). `Refused` when it refuses, or is not this user's."""
    if not rendezvous.check_socket(where.sock):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        raw = _exchange(sock, where, hello)
        answer = None if raw is None else parse_answer(raw)
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
        answer = None
    except (OSError, ValueError) as exc:
        sock.close()
        raise Refused(f"cannot talk to the fleet on {where.sock}: {exc}") from None
    except BaseException:
        sock.close()
        raise
    if answer is None or isinstance(answer, str):
        sock.close()
    if isinstance(answer, str):
        raise Refused(f"the fleet refused this host: {answer}")
    return None if answer is None else Connection(sock, answer)


def _exchange(sock: socket.socket, where: Place, hello: Hello) -> bytes | None:
    with rendezvous.address(where) as address:
        sock.settimeout(CONNECT_S)
        sock.connect(address)
    rendezvous.check_peer(sock, "fleet")
    sock.settimeout(ANSWER_S)
    sock.sendall(hello.line())
    raw = read_answer(sock, ANSWER_S)
    sock.settimeout(None)
    return raw


def _same_package(env: dict[str, str]) -> dict[str, str]:
    """`env` with this package's folder first on PYTHONPATH: `python -m emceepee_cli` in the
    fleet (started in /) runs the code this front runs, whose place its socket's name carries
    (a checkout beside an installed copy would otherwise start the installed one, elsewhere)."""
    here = str(rendezvous.PACKAGE.parent)
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([here, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]),
    }


def start(where: Place, hello: Hello) -> int | None:
    """Start a fleet (the caller holds the start lock) and wait for it to listen: its pid, or None
    when it ended before (another fleet took the live lock, or it failed: its log says)."""
    read_end, write_end = os.pipe()
    argv = [
        sys.executable,
        *("-m", "emceepee_cli", "fleet", "run", "--detach", "--ready-fd", str(write_end)),
        *("--config", hello.config, "--db", hello.db),
        *(["--verbose"] if hello.verbose else []),
    ]
    log = _open_log()
    try:
        intermediate = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(write_end,),
            env=_same_package(fleet_env(os.environ)),
            cwd="/",
            start_new_session=True,
        )
        os.close(write_end)
        write_end = -1
        intermediate.wait(timeout=FLEET_START_S)  # it forks the fleet and leaves at once
        return _ready(read_end, time.monotonic() + FLEET_START_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise Refused(f"cannot start the fleet: {exc}") from None
    finally:
        if not isinstance(log, int):
            log.close()  # the fleet has its own copy
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def _ready(fd: int, deadline: float) -> int | None:
    """The pid in the fleet's `ready PID` line; None at EOF (it ended first). `Refused` past `deadline`."""
    seen = b""
    while b"\n" not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise Refused(f"the fleet did not listen within {FLEET_START_S:g} s; its log: {fleet_log()}")
        chunk = os.read(fd, 64)
        if not chunk:
            return None
        seen += chunk
    word, _, pid = seen.partition(b"\n")[0].partition(b" ")
    return int(pid) if word == b"ready" and pid.isdigit() else None


def fleet_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What the fleet's own environment keeps of `environ`: no host's secrets."""
    return {k: v for k, v in environ.items() if k in FLEET_ENV or k.startswith(FLEET_ENV_PREFIXES)}


def fleet_log() -> Path:
    """The fleet's log file: its stdout and stderr."""
    return paths.logs_dir() / "fleet.log"


def _open_log() -> IO[bytes] | int:
    path = fleet_log()
    try:
        paths.ensure_private_dir(path.parent)
        if path.exists() and path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        return open(path, "ab")  # closed by the caller once the fleet has it
    except OSError:
        return subprocess.DEVNULL


def detach() -> None:
    """Fork once more and end the parent (the process a front started, which it reaps): the child
    goes on in a session of its own, nobody's child (init's, or a subreaper's)."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
