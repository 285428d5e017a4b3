"""Whose exit `serve` collects: an orphan a backend left, never a backend itself.

`serve` is the child subreaper of everything it starts (`processes.become_subreaper`), so what a
backend orphans is re-parented to serve and becomes serve's to collect once it exits:
`reap_adopted` for one a scan saw alive below a backend, `reap_orphan` for one that exited before
any scan saw it (backends/descendants.py). A backend's own exit is asyncio's child watcher's, and
emceepee reports it with its exit code: `spawning`, `waited_for` and `collected` keep serve's
reaping off such a child (backends/transport.py, backends/process.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from emceepee_cli import processes


def reap_adopted(proc: processes.Proc) -> None:
    """Collect the exit of an adopted child that has exited (a zombie), so it leaves the process
    table. Only for a process we saw alive below a backend: never one asyncio waits for."""
    found = processes.stat(proc.pid)
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
    found = processes.stat(pid)
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
    """asyncio has collected `pid`'s exit: from now on the pid may name any process."""
    _waited_for.discard(pid)


_waited_for: set[int] = set()  # our children whose exit status belongs to asyncio (backends)
_spawning = 0  # spawns under way: a child may exist that is not in _waited_for yet
