"""Processes as emceepee must see them to stop everything it started, and nothing else.

A pid alone is not a process: the kernel reuses pids. A `Proc` is a pid plus its start time, and
every signal goes through `Proc.signal`, which checks that the pid still names the same process
(through a pidfd where the kernel has them, so the check and the signal cannot race). `tree` finds
what a backend started, including children that left its process group with setsid(), by reading
the whole process table; `descendants` walks only one tree (its /proc/PID/task/TID/children
files), cheap enough to run every second (backends/descendants.py). `serve` makes itself a child
subreaper, so what a backend orphans is re-parented to serve, not to init, and stays findable;
serve then collects its exit too, but never a backend's own (emceepee_cli/child_exits.py). On
Linux a backend is also spawned with a parent-death signal, so it hears of emceepee's death even
when emceepee is killed with SIGKILL and never gets to stop it. Whether the `serve` an
`instances` row names still runs is emceepee_cli/start_tokens.py, over `stat` and `exists`.

Where each fact comes from:
- Linux (`HAVE_PROC`): one read of /proc/PID/stat gives a process's state, parent, group and start,
  the start in clock ticks since boot, which nothing moves. psutil's `create_time` is those ticks
  plus the boot time in wall-clock seconds, read afresh each time: it moves whenever the clock is
  set (an NTP step), and a start compared across the step would take a live `serve` for dead.
  psutil's `children` reads every process's stat; the children files read only the tree below
  serve, which the scan each second needs.
- Elsewhere (macOS, Windows: not exercised), psutil: `create_time` (in microseconds), `status`,
  `ppid`, `pids`; `os.getpgid` for the process group, which psutil has no call for. psutil moves
  `create_time` with clock steps there too, so a start that no longer matches makes a process
  unknown (never signalled, never declared dead), and a backend is also signalled through its
  process group (backends/process.py). Without children files the scan each second stays off.
  psutil is imported only there: a CLI command on Linux does not pay for its import.
- Through os and ctypes on every platform, because psutil has no such thing: the child subreaper
  and the parent-death signal (prctl, Linux only), signals through a pidfd, SIGSTOP to freeze what
  keeps forking, and collecting an adopted orphan's exit (waitpid).

One policy for a process that cannot be read (`stat`, `exists`):
- gone: the kernel has no such pid (ESRCH; psutil's NoSuchProcess). Not running, and dead.
- exited: a zombie (state Z or X; psutil's ZombieProcess). Nothing left to stop, and dead; its
  exit may be serve's to collect.
- unseen: the pid exists but may not be read (EACCES, a /proc mounted with hidepid, psutil's
  AccessDenied, a line that does not parse). `stat` says None, as for a gone one: its identity
  cannot be checked, so it is never signalled (emceepee kills nothing it cannot tell it started).
  But it is never declared dead: `start_tokens.same_process` then asks `exists`, for which only
  the kernel's "no such process" is gone, and answers "cannot tell", which leaves it to the
  heartbeat.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
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
MAX_ANCESTORS = 64  # `ancestors` looks no higher: a table that changes while it is read cannot loop
EXITED = ("Z", "X")  # a zombie (exited, not yet reaped), or dead
_STATES = {"running": "R", "disk-sleep": "D", "stopped": "T", "tracing-stop": "t", "zombie": "Z", "dead": "X"}


@dataclass(frozen=True)
class Stat:
    """What emceepee reads of a process: as /proc/PID/stat has it, or psutil where there is no /proc."""

    state: str  # /proc's letter: R running, S sleeping, T stopped, Z exited but not reaped, X dead…
    ppid: int
    pgrp: int  # 0 where it cannot be read (Windows has no process groups)
    start: int | None  # as `Proc.start`; None for a zombie psutil cannot date

    @property
    def exited(self) -> bool:
        return self.state in EXITED


def stat(pid: int) -> Stat | None:
    """What process `pid` is now; None if it is gone or may not be read (the module's policy)."""
    return _read_proc(pid) if HAVE_PROC else _read_psutil(pid)


def _read_proc(pid: int) -> Stat | None:
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    fields = raw.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    try:
        return Stat(state=fields[0], ppid=int(fields[1]), pgrp=int(fields[2]), start=int(fields[19]))
    except (IndexError, ValueError):
        return None


def _read_psutil(pid: int) -> Stat | None:
    import psutil

    try:
        process = psutil.Process(pid)
        with process.oneshot():
            state, ppid = _STATES.get(process.status(), "S"), process.ppid()
            start = round(process.create_time() * 1_000_000)
    except psutil.ZombieProcess as exc:  # before NoSuchProcess, of which it is a kind
        return Stat(state="Z", ppid=exc.ppid or 0, pgrp=0, start=None)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return Stat(state=state, ppid=ppid, pgrp=_group(pid), start=start)


def _group(pid: int) -> int:
    getpgid = getattr(os, "getpgid", None)  # Windows has none
    if getpgid is None:
        return 0
    try:
        return int(getpgid(pid))
    except OSError:
        return 0


def exists(pid: int) -> bool:
    """Whether the kernel still has `pid`: running, a zombie, or one that may not be read. Only its
    own "no such process" counts as gone (not an unreadable /proc entry, as with hidepid)."""
    if sys.platform == "win32":  # os.kill(pid, 0) would send CTRL_C_EVENT there
        import psutil

        return bool(psutil.pid_exists(pid))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's process, which exists
        return True
    return True


@dataclass(frozen=True)
class Proc:
    pid: int
    # When it started: on Linux clock ticks since boot, elsewhere psutil's create_time in
    # microseconds. None where it could not be read: such a Proc is never taken for running.
    start: int | None

    def __repr__(self) -> str:
        return f"<Proc {self.pid} start={self.start} {'running' if self.running() else 'gone'}>"

    def running(self) -> bool:
        """Still this very process, and not a zombie waiting to be reaped. One whose start is not
        known, or that may not be read, is not: what cannot be identified is never signalled."""
        if self.start is None:
            return False
        found = stat(self.pid)
        return found is not None and found.start == self.start and not found.exited

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
    children: dict[int, list[int]] = {}
    found: dict[int, Stat] = {}
    for each in _pids():
        info = stat(each)
        if info is not None:
            found[each] = info
            children.setdefault(info.ppid, []).append(each)
    members = {p for p, info in found.items() if info.pgrp == pid}
    todo, seen = list(children.get(pid, []) if descendants else []), set()
    while todo:
        child = todo.pop()
        if child not in seen and _born_after(found.get(child), found.get(found[child].ppid)):
            seen.add(child)
            todo.extend(children.get(child, []))
    return {Proc(p, found[p].start) for p in (seen | members) - {pid} if p in found}


def _pids() -> list[int]:
    if HAVE_PROC:
        return [int(entry.name) for entry in os.scandir(PROC) if entry.name.isdigit()]
    import psutil

    return list(psutil.pids())


def _born_after(child: Stat | None, parent: Stat | None) -> bool:
    """A child never started before its parent. Where orphans keep a dead parent's pid as theirs
    (Windows), one that did names an older process whose parent's pid was reused: not below it."""
    if child is None or parent is None or child.start is None or parent.start is None:
        return True
    return child.start >= parent.start


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
    the kernel has no such files (use `tree`, which reads the whole process table, instead)."""
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
        if info is None or info.exited:  # exited: nothing left to stop
            continue
        found.add(Proc(child, info.start))
        todo.extend(children(child) or [])
    return found


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux): a descendant whose
    parent exits is re-parented to us, not to init, so it stays below us and in sight. Such an
    adopted process is then ours to reap (`child_exits.reap_adopted`). For `serve` only: never a
    test runner."""
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


def _pidfd(pid: int) -> int | None:
    if sys.platform != "linux":  # pidfds are Linux's
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # a kernel before 5.3, or the process is gone
        return None


def ancestors(pid: int) -> list[int]:
    """The pids above `pid`, its parent first, up to (not including) pid 1; [] where they cannot be
    read. Bounded (`MAX_ANCESTORS`), so a table that changes while it is read cannot loop."""
    out: list[int] = []
    while len(out) < MAX_ANCESTORS:
        found = stat(pid)
        if found is None or found.ppid <= 1 or found.ppid in out:
            break
        out.append(found.ppid)
        pid = found.ppid
    return out
