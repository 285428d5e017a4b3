"""Where a host's `serve` (the front) meets the per-user fleet: a Unix socket in a private folder.

The folder is `paths.runtime_dir()` (under EMCEEPEE_HOME, else XDG_RUNTIME_DIR, else the data
folder), made 0700. The socket's name carries emceepee's version and a key of the files the fleet
serves (config, journal, data folder) and of the package it runs
(`fleet-0.1.0-1a2b3c4d5e6f7a8b.sock`): a front meets only a fleet of its own version serving its own
files. Beside the socket, two lock files:

- `NAME.start.lock`: held by a front while it starts a fleet, and by a fleet while it leaves at
  its idle exit, so two fronts starting at once start one fleet, and none connects to one that is
  going;
- `NAME.live.lock`: held by the fleet for its whole life, with its pid written in it. The kernel
  frees it when the fleet dies (a kill -9 too): a socket whose live lock is free is stale.

Nothing found there is trusted: the folder and the socket must be this user's, not a symbolic link,
and closed to group and others (`check_dir`, `check_socket`); the peer on a connection must run
as this user (`check_peer`: SO_PEERCRED on Linux, getpeereid elsewhere). Anything else is
`Refused`, with what to do about it, and `serve` runs in-process. A socket path longer than
AF_UNIX allows (107 bytes on Linux; test folders are that long) is bound and reached through the
folder opened here, as /proc/self/fd/N/NAME (`address`).

Whether the fleet is on at all is `switch` (EMCEEPEE_FLEET, then the config's [fleet] enabled).
Besides fronts, the command line talks to a fleet on the same socket (`control`): a first line
`{"emceepee_control": 1, "op": "status"|"stop"|"poke", "version": …}` instead of a front's hello,
answered with one JSON object (fleet/control.py says what each op does). It never starts a fleet:
with none listening, `control` is None. `poke_fleets` is `emceepee answer`'s: every fleet of this
emceepee in the runtime folder looks at the journal at once, within a bound, failures unsaid.

The standard library only, besides `paths`: the front imports this, and it must stay light; the
command line (`emceepee fleet`, `answer`, `doctor`) imports it without the MCP SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import struct
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from emceepee_cli import __version__, paths

try:
    import fcntl
except ImportError:  # Windows: no Unix sockets either, so serve never gets this far
    fcntl = None  # type: ignore[assignment]  # no fcntl on Windows: the fleet is never used there

SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103  # bytes of a socket path, the NUL aside
PROC_FD = Path("/proc/self/fd")
START_LOCK_S = 20.0  # as long as a front waits for a fleet to start (fleet/starter.py)
LIVE_LOCK_S = 0.5  # a front looking whether the fleet lives holds the live lock for microseconds
LOCK_POLL_S = 0.01
PACKAGE = Path(__file__).resolve().parent
SWITCH = "EMCEEPEE_FLEET"  # "1": serve through the fleet; "0": in-process, whatever the config says
PREFIX = "fleet-"
CONTROL_PROTOCOL = 1  # the control line's shape; a fleet refuses another
CONTROL_OPS = ("status", "stop", "poke")
CONTROL_ANSWER_MAX_BYTES = 1024 * 1024


class Refused(Exception):
    """The rendezvous cannot be used (safely, or at all); the message says why and what to do."""


@dataclass(frozen=True)
class Place:
    """Where the fleet for one set of files lives: its folder and the name of its socket and locks."""

    folder: Path
    name: str  # fleet-VERSION-KEY

    @property
    def sock(self) -> Path:
        return self.folder / f"{self.name}.sock"

    @property
    def start_lock(self) -> Path:
        return self.folder / f"{self.name}.start.lock"

    @property
    def live_lock(self) -> Path:
        return self.folder / f"{self.name}.live.lock"


def place(config: Path, db: Path) -> Place:
    """The place of the fleet serving this config and journal, for this version and package."""
    parts = (config.resolve(), db.resolve(), paths.data_dir().resolve(), PACKAGE)
    text = "\0".join(map(str, parts)).encode()
    # Only to tell places apart (a fleet also checks the files a hello names): zlib is loaded by now,
    # where hashlib would load OpenSSL into the front, 3.5 MB of it.
    key = f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"
    return Place(paths.runtime_dir(), f"{PREFIX}{version_tag(__version__)}-{key}")


def version_tag(version: str) -> str:
    """A version as a socket's name carries it."""
    return re.sub(r"[^A-Za-z0-9.]", "_", version)


def version_of(where: Place) -> str:
    """The emceepee version (as its name carries it) of the fleet of a place."""
    return where.name.removeprefix(PREFIX).rpartition("-")[0]


def places(folder: Path) -> list[Place]:
    """The places of every fleet socket in `folder`, of any version, by name; [] when it is missing."""
    try:
        found = sorted(folder.glob(f"{PREFIX}*.sock"))
    except OSError:
        return []
    return [Place(folder, sock.name.removesuffix(".sock")) for sock in found]


DEFAULT = "the default"  # who says the fleet is on when nobody does


def switch(config_path: Path, enabled: bool | None) -> tuple[bool, str]:
    """Whether the fleet is on for the config at `config_path`, whose [fleet] enabled is `enabled`,
    and who said so (`DEFAULT`: nobody, so it is on). EMCEEPEE_FLEET=0 and `enabled = false` win
    over a yes."""
    said = os.environ.get(SWITCH)
    if said == "0":
        return False, f"{SWITCH}=0"
    if enabled is False:
        return False, f"[fleet] enabled = false in {config_path}"
    if said == "1":
        return True, f"{SWITCH}=1"
    if enabled is True:
        return True, f"[fleet] enabled = true in {config_path}"
    return True, DEFAULT


def prepare(where: Place) -> bool:
    """Make the folder (0700) if need be, then check it and the socket in it; whether the socket
    exists. `Refused` when either cannot be used."""
    try:
        paths.ensure_private_dir(where.folder)
    except OSError as exc:
        blocking = paths.unwritable_folder(where.folder) or where.folder.parent
        raise Refused(
            f"cannot make the fleet's folder {where.folder}: {exc.strerror or exc}. To fix: chmod u+w "
            f"{blocking}, or set XDG_RUNTIME_DIR to a folder of yours"
        ) from None
    check_dir(where.folder)
    return check_socket(where.sock)


def check_dir(path: Path) -> None:
    """`path` is a folder of this user's, not a symbolic link, that nobody else may enter."""
    try:
        found = os.lstat(path)
    except OSError as exc:
        raise Refused(f"cannot look at the fleet's folder {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(found.st_mode) or not stat.S_ISDIR(found.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(found.st_mode) else "not a folder"
        raise Refused(f"the fleet's folder {path} is {what}. To fix: remove it (emceepee makes the folder)")
    _private(path, found, f"chmod 700 {path}", f"remove {path} (emceepee makes the folder)")


def check_socket(path: Path) -> bool:
    """Whether `path` exists; when it does, it is a socket of this user's that nobody else may use."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise Refused(f"cannot look at the fleet's socket {path}: {exc.strerror or exc}") from None
    if not stat.S_ISSOCK(found.st_mode):
        raise Refused(f"{path} is not a socket. To fix: remove it (the fleet makes its socket)")
    remove = f"rm {path} (the next serve starts a fleet with a new one)"
    _private(path, found, remove, remove)
    return True


def _private(path: Path, found: os.stat_result, loose_fix: str, owner_fix: str) -> None:
    """`path` (as `found`) is this user's, and closed to group and others; else `Refused`."""
    if found.st_uid != os.geteuid():
        raise Refused(
            f"{path} belongs to user {found.st_uid}, not to this user ({os.geteuid()}): emceepee never "
            f"talks to a fleet another user could run. To fix: {owner_fix}"
        )
    if found.st_mode & 0o077:
        raise Refused(
            f"{path} is open to other users (mode {stat.S_IMODE(found.st_mode):o}): anyone who may "
            f"use it could pose as the fleet. To fix: {loose_fix}"
        )


def peer(sock: socket.socket) -> tuple[int, int | None]:
    """The user id and (on Linux) the pid of the process at the other end of a Unix socket."""
    if hasattr(socket, "SO_PEERCRED"):
        size = struct.calcsize("3i")
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))
        return uid, pid
    import ctypes  # macOS and the BSDs: loaded only there

    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    if libc.getpeereid(sock.fileno(), ctypes.byref(uid), ctypes.byref(gid)) != 0:
        raise OSError(ctypes.get_errno(), "getpeereid")
    return uid.value, None


def check_peer(sock: socket.socket, who: str) -> int | None:
    """The peer's pid (None where it cannot be known); `Refused` unless it runs as this user."""
    uid, pid = peer(sock)
    if uid != os.geteuid():
        raise Refused(
            f"the {who} on the fleet's socket runs as user {uid}, not as this user ({os.geteuid()})"
        )
    return pid


@contextlib.contextmanager
def address(where: Place) -> Iterator[str]:
    """The path to bind or connect the socket at: its own, or when that is longer than a Unix socket's
    path may be, /proc/self/fd/N/NAME of its folder, opened here (and checked) for the while."""
    path = str(where.sock)
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    if not PROC_FD.is_dir():
        raise Refused(
            f"the fleet's socket path {path} is longer than the {SUN_PATH_MAX} bytes a Unix socket's path "
            "may have. To fix: set XDG_RUNTIME_DIR (or EMCEEPEE_HOME) to a shorter folder"
        )
    try:
        fd = os.open(where.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Refused(f"cannot open the fleet's folder {where.folder}: {exc.strerror or exc}") from None
    try:
        _private(where.folder, os.fstat(fd), f"chmod 700 {where.folder}", f"remove {where.folder}")
        yield f"{PROC_FD}/{fd}/{where.sock.name}"
    finally:
        os.close(fd)


@contextlib.contextmanager
def start_lock(where: Place, wait_s: float = START_LOCK_S) -> Iterator[None]:
    """Hold the start lock, waiting at most `wait_s`; else `Refused`."""
    fd = take_start_lock(where, wait_s)
    if fd is None:
        raise Refused(
            f"the fleet's start lock {where.start_lock} was held for over {wait_s:g} s (by a fleet "
            "starting, or leaving)"
        )
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def take_start_lock(where: Place, wait_s: float = 0.0) -> int | None:
    """The start lock's descriptor, held until it is closed (a leaving fleet keeps it until it has
    exited); None when it stayed held by another for `wait_s` (0: one try)."""
    fd = _open_lock(where.start_lock)
    if _flock(fd, fcntl.LOCK_EX, wait_s):
        return fd
    os.close(fd)
    return None


def hold_live(where: Place, wait_s: float = LIVE_LOCK_S) -> int | None:
    """Take the live lock for the rest of this process's life and write this pid in it: the
    descriptor, to keep open; None when another fleet holds it."""
    fd = _open_lock(where.live_lock)
    if not _flock(fd, fcntl.LOCK_EX, wait_s):
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def alive(where: Place) -> bool:
    """Whether a fleet holds this place's live lock (one looking at it holds it shared, briefly)."""
    try:
        fd = os.open(where.live_lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise Refused(f"cannot read the fleet's lock {where.live_lock}: {exc.strerror or exc}") from None
    try:
        return not _flock(fd, fcntl.LOCK_SH, 0.0)
    finally:
        os.close(fd)


def live_pid(where: Place, wait_s: float = LIVE_LOCK_S) -> int | None:
    """The pid of the fleet living at this place, None when none does. A fleet that has just taken
    its lock writes its pid a moment later: that moment is waited for, at most `wait_s`."""
    deadline = time.monotonic() + wait_s
    while alive(where):
        with contextlib.suppress(OSError, ValueError):
            return int(where.live_lock.read_text().strip())
        if time.monotonic() >= deadline:
            return None
        time.sleep(LOCK_POLL_S)
    return None


def _open_lock(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise Refused(
            f"cannot open the fleet's lock {path}: {exc.strerror or exc}. To fix: chmod u+w {path.parent}"
        ) from None


def _flock(fd: int, kind: int, wait_s: float) -> bool:
    """Take a lock on `fd`, trying until `wait_s` has passed; whether it was taken."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(LOCK_POLL_S)
        else:
            return True


def control_line(op: str, version: str = __version__) -> bytes:
    """The first line of a control connection (fleet/control.py reads it)."""
    doc = {"emceepee_control": CONTROL_PROTOCOL, "op": op, "version": version}
    return json.dumps(doc).encode() + b"\n"


def control(where: Place, op: str, timeout_s: float) -> dict[str, Any] | None:
    """The answer of the fleet at `where` to the control request `op`, within `timeout_s`; None when
    no fleet listens there (or it closed without answering: it is leaving). `Refused` when the
    socket or the peer is not this user's, the fleet refuses, answers garbage, or not in time."""
    if not check_socket(where.sock):
        return None
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            with address(where) as at:
                sock.settimeout(timeout_s)
                sock.connect(at)
            check_peer(sock, "fleet")
            sock.sendall(control_line(op))
            raw = _answer_line(sock, deadline)
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            return None
        except OSError as exc:  # a timeout too
            raise Refused(f"the fleet on {where.sock} did not answer: {exc.strerror or exc}") from None
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        raise Refused(f"the fleet on {where.sock} answered what is not a JSON object")
    answer = cast(dict[str, Any], doc)
    if "refused" in answer:
        raise Refused(f"the fleet on {where.sock} refused {op!r}: {answer['refused']}")
    return answer


def _answer_line(sock: socket.socket, deadline: float) -> bytes | None:
    """One line from `sock` before `deadline` (`TimeoutError` after); None at EOF before a newline."""
    seen = bytearray()
    while b"\n" not in seen:
        if len(seen) > CONTROL_ANSWER_MAX_BYTES:
            raise Refused(f"the fleet's answer is longer than {CONTROL_ANSWER_MAX_BYTES} bytes")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock.settimeout(left)
        chunk = sock.recv(64 * 1024)
        if not chunk:
            return None
        seen += chunk
    return bytes(seen).partition(b"\n")[0]


def poke_fleets(budget_s: float) -> int:
    """Have every fleet of this emceepee in the runtime folder look at the journal now (the one
    whose host's call asked the question hears the answer at once); how many did. Bounded by
    `budget_s` in all; never starts a fleet, and fails silently (the fleet's watcher looks anyway)."""
    deadline = time.monotonic() + budget_s
    mine = version_tag(__version__)
    poked = 0
    try:
        check_dir(paths.runtime_dir())
    except Refused:
        return 0
    for where in places(paths.runtime_dir()):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if version_of(where) != mine:
            continue
        with contextlib.suppress(Refused, OSError, ValueError):
            poked += control(where, "poke", left) is not None
    return poked
