"""Is the process that wrote an `instances` row still running? Decided by pid *and* start time.

A pid alone can be reused after a process dies, and a heartbeat alone lies whenever a live
process is frozen (a suspended laptop, SIGSTOP, a long lock): so a row records its process's
start time, and the process is the same one only when both match.

Where the start time comes from:
- Linux: field 22 of /proc/PID/stat (clock ticks since boot), prefixed with the boot id so a
  reboot cannot make an old row match a new process.
- elsewhere with a `ps` (macOS, the BSDs): `ps -o lstart= -p PID` (to the second; with the pid
  that is enough to tell a reused pid from the original).
- nowhere else (Windows): no start time; callers fall back to the heartbeat.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PS_TIMEOUT_S = 2.0
MAX_ANCESTORS = 64
PS = "/bin/ps"  # the system's, by its path: a `ps` earlier on PATH could say anything
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def start_time(pid: int) -> str | None:
    """An opaque token for when process `pid` started, or None if it is gone or cannot be told."""
    stat = _proc_stat(pid)
    if stat is not None:
        fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
        if fields[0] in ("Z", "X"):  # a zombie has exited: its start time no longer names a process
            return None
        return f"linux:{_boot_id()}:{fields[19]}"  # field 22 of the whole line
    if Path("/proc/self/stat").exists():
        return None  # a /proc system without this pid: the process is gone
    return _ps_start(pid)


def same_process(pid: int, recorded: str | None) -> bool | None:
    """True: the process that recorded `recorded` still runs. False: it is gone (or its pid was
    reused). None: cannot tell (no start time recorded, or none readable here)."""
    if not _exists(pid):
        return False
    current = start_time(pid)
    if current is None:
        return False if _zombie(pid) else None
    return None if recorded is None else current == recorded


def ancestors(pid: int) -> list[int]:
    """The pids above `pid`, its parent first, up to (not including) pid 1; [] where they cannot be
    read. Bounded, so a table that changes while it is read cannot loop."""
    out: list[int] = []
    while len(out) < MAX_ANCESTORS:
        parent = _parent(pid)
        if parent is None or parent <= 1 or parent in out:
            break
        out.append(parent)
        pid = parent
    return out


def _parent(pid: int) -> int | None:
    stat = _proc_stat(pid)
    if stat is not None:
        return int(stat.rpartition(")")[2].split()[1])  # field 4 of the whole line
    if Path("/proc/self/stat").exists():
        return None
    text = _ps(pid, "ppid=") or ""
    return int(text) if text.isdigit() else None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:  # Windows raises this for a pid that is not running
        return False
    return True


def _zombie(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _proc_stat(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None


def other_boot(recorded: str | None) -> bool:
    """True when `recorded` (a `start_time` token) was taken before this machine last booted:
    no process it names can still run, whatever pid and clock ticks a new one has."""
    if recorded is None or not recorded.startswith("linux:"):
        return False
    boot = recorded.split(":")[1]
    return boot not in ("?", _boot_id())


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return "?"


def _ps_start(pid: int) -> str | None:
    state, _, started = (_ps(pid, "stat=", "lstart=") or "").partition(" ")
    if not started or state.startswith("Z"):
        return None
    return f"ps:{' '.join(started.split())}"


def _ps(pid: int, *fields: str) -> str | None:
    """What the system's `ps` says of `pid` (`fields` as its -o takes them), or None."""
    columns = [arg for field in fields for arg in ("-o", field)]
    try:
        done = subprocess.run(
            [PS, *columns, "-p", str(pid)],
            check=False,
            capture_output=True,
            text=True,
            timeout=PS_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
