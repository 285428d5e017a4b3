"""Processes as emceepee must see them to stop everything it started, and nothing else.

A pid alone is not a process: the kernel reuses pids. A `Proc` is a pid plus its start time
(field 22 of /proc/PID/stat, clock ticks since boot), and every signal goes through
`Proc.signal`, which checks that the pid still names the same process (through a pidfd where
the kernel has them, so the check and the signal cannot race). `tree` finds what a backend
started, including children that left its process group with setsid(), by reading all of
/proc; `descendants` walks only one tree (its /proc/PID/task/TID/children files), cheap enough
to run every second (backends/descendants.py). `serve` makes itself a child subreaper, so what a
backend orphans is re-parented to serve, not to init, and stays findable; serve then collects
its exit too (`reap_orphan`), but never a backend's own, which asyncio collects and emceepee
reports (`spawning`, `waited_for`, `collected` keep the two apart). On Linux a backend is
also spawned with a parent-death signal, so it hears of emceepee's death even when emceepee is
killed with SIGKILL and never gets to stop it.

Without /proc (macOS, Windows) start times are unknown, `tree` finds nothing, and stopping a
backend falls back to signalling its process group.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
HAVE_PROC = sys.platform.startswith("linux") and (PROC / "self" / "stat").exists()
_CHILDREN_FILES = HAVE_PROC and (PROC / "self" / "task" / str(os.getpid()) / "children").exists()
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PARENT_DEATH_SIGNAL = (
    signal.SIGTERM
)  # wrappers (npx, uvx) forward it to their own children; SIGKILL would not
POLL_S = 0.02  # how often to look whether a process that is not our child has gone


@dataclass(frozen=True)
class Stat:
    state: str
    ppid: int
    pgrp: int
    start: int


def stat(pid: int) -> Stat | None:
    """The fields of /proc/PID/stat emceepee uses; None if there is no such process (or no /proc)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    fields = raw.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    try:
        return Stat(state=fields[0], ppid=int(fields[1]), pgrp=int(fields[2]), start=int(fields[19]))
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int | None  # None where start times cannot be known (no /proc)

    def __repr__(self) -> str:
        return f"<Proc {self.pid} start={self.start} {'running' if self.running() else 'gone'}>"

    def running(self) -> bool:
        """Still this very process, and not a zombie waiting to be reaped."""
        if not HAVE_PROC or self.start is None:
            return _exists(self.pid)
        found = stat(self.pid)
        return found is not None and found.start == self.start and found.state not in ("Z", "X")

    def signal(self, sig: int) -> None:
        """Signal it if it is still this process; a reused pid is never touched."""
        pidfd = _pidfd(self.pid)
        try:
            if not self.running():
                return
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        finally:
            if pidfd is not None:
                os.close(pidfd)


def identify(pid: int) -> Proc:
    found = stat(pid)
    return Proc(pid, found.start if found else None)


def tree(pid: int, descendants: bool = True) -> set[Proc]:
    """Every member of the process group `pid` leads and, unless told not to, every descendant.

    Children that called setsid() are still descendants while their parent lives: take this
    snapshot before stopping the parent, because its orphans are re-parented when it goes.
    Once `pid` has been reaped it may name another process, so ask only for the group then
    (Linux does not reuse a pid while a process group still carries it).
    """
    if not HAVE_PROC:
        return set()
    children: dict[int, list[int]] = {}
    found: dict[int, Stat] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        info = stat(int(entry.name))
        if info is not None:
            found[int(entry.name)] = info
            children.setdefault(info.ppid, []).append(int(entry.name))
    members = {p for p, info in found.items() if info.pgrp == pid}
    todo, seen = list(children.get(pid, []) if descendants else []), set()
    while todo:
        child = todo.pop()
        if child not in seen:
            seen.add(child)
            todo.extend(children.get(child, []))
    return {Proc(p, found[p].start) for p in (seen | members) - {pid} if p in found}


def children(pid: int, threads: bool = True) -> list[int] | None:
    """The pids `pid` forked (from any of its threads; `threads=False`: its main thread only),
    read from /proc/PID/task/TID/children: only this process is read, not all of /proc. None
    where the kernel keeps no such file (built without CONFIG_PROC_CHILDREN), or no /proc."""
    if not HAVE_PROC:
        return None
    task = PROC / str(pid) / "task"
    try:
        tids = [e.name for e in os.scandir(task)] if threads else [str(pid)]
    except OSError:  # the process is gone
        return [] if _CHILDREN_FILES else None
    found: list[int] = []
    for tid in tids:
        try:
            found.extend(int(c) for c in (task / tid / "children").read_text().split())
        except FileNotFoundError:
            if not (task / tid).exists():
                continue  # the thread ended since the listing
            return None
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int, threads: bool = True) -> set[Proc] | None:
    """Everything below `pid` that its `children` files lead to, with start times; None where
    the kernel has no such files (use `tree`, which reads all of /proc, instead)."""
    below = children(pid, threads)
    if below is None:
        return None
    found: set[Proc] = set()
    todo, seen = list(below), {pid}
    while todo:
        child = todo.pop()
        if child in seen:
            continue
        seen.add(child)
        info = stat(child)
        if info is None or info.state in ("Z", "X"):  # exited: nothing left to stop
            continue
        found.add(Proc(child, info.start))
        todo.extend(children(child) or [])
    return found


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux): a descendant whose
    parent exits is re-parented to us, not to init, so it stays below us and in sight. Such an
    adopted process is then ours to reap (`reap_adopted`). For `serve` only: never a test runner."""
    global _subreaper
    prctl = _prctl()
    _subreaper = prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def is_subreaper() -> bool:
    return _subreaper


_subreaper = False


def _prctl() -> Callable[..., int] | None:
    if not HAVE_PROC:
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def reap_adopted(proc: Proc) -> None:
    """Collect the exit of an adopted child that has exited (a zombie), so it leaves the process
    table. Only for a process we saw alive below a backend: never one asyncio waits for."""
    found = stat(proc.pid)
    if found is None or found.start != proc.start or found.state != "Z" or found.ppid != os.getpid():
        return
    if proc.pid in _waited_for:
        return
    with suppress(ChildProcessError, OSError):
        os.waitpid(proc.pid, os.WNOHANG)


def reap_orphan(pid: int) -> bool:
    """Collect the exit of a child of ours that has exited (a zombie) and whose exit nobody else
    waits for: an orphan a backend left, adopted by serve and gone before a scan saw it alive.
    True if it was collected. Never a child asyncio waits for (`waited_for`), and nothing while a
    spawn is under way (`spawning`: the new child's pid is not known yet): taking such an exit
    would cost a backend its exit code."""
    if _spawning or pid in _waited_for:
        return False
    found = stat(pid)
    if found is None or found.state != "Z" or found.ppid != os.getpid():
        return False
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except OSError:  # ChildProcessError: collected meanwhile
        return False
    return reaped == pid


@contextmanager
def spawning() -> Iterator[None]:
    """Around the spawn of a child whose exit asyncio collects, until its pid is `waited_for`."""
    global _spawning
    _spawning += 1
    try:
        yield
    finally:
        _spawning -= 1


def waited_for(pid: int) -> None:
    """`pid` is a child of ours whose exit asyncio's child watcher collects, until `collected`."""
    _waited_for.add(pid)


def collected(pid: int) -> None:
    _waited_for.discard(pid)


_waited_for: set[int] = set()  # our children whose exit status belongs to asyncio (backends)
_spawning = 0  # spawns under way: a child may exist that is not in _waited_for yet


def terminate(procs: Iterable[Proc], grace_s: float, kill_wait_s: float = 1.0) -> list[Proc]:
    """SIGTERM, then SIGKILL after `grace_s`: for processes we cannot wait() on. Blocks; returns survivors."""
    left = [p for p in procs if p.running()]
    for sig, wait_s in ((signal.SIGTERM, grace_s), (_SIGKILL, kill_wait_s)):
        for proc in left:
            proc.signal(sig)
        left = _wait_gone(left, wait_s)
        if not left:
            break
    return left


def _wait_gone(procs: list[Proc], timeout_s: float) -> list[Proc]:
    deadline = time.monotonic() + timeout_s
    left = [p for p in procs if p.running()]
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [p for p in left if p.running()]
    return left


def parent_death_hook() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child get SIGTERM when emceepee dies, however it dies.

    Linux only. The signal is tied to the thread that forks: spawn from the event loop's thread.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent, sig = os.getpid(), int(PARENT_DEATH_SIGNAL)

    def in_child() -> None:  # runs between fork and exec: no imports, no locks, no logging
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # emceepee died before the signal was armed
            os.kill(os.getpid(), sig)

    return in_child


_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def _exists(pid: int) -> bool:
    if sys.platform == "win32":
        return False  # os.kill(pid, 0) would send CTRL_C_EVENT there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _pidfd(pid: int) -> int | None:
    if sys.platform != "linux":  # pidfds are Linux's
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # a kernel before 5.3, or the process is gone
        return None
