"""What backends start, seen as it appears: stopped with them, journaled, and never left behind.

A backend may start processes that leave its process group (setsid) and outlive it; once their
parent is gone, no process-group signal and no walk down from the backend finds them. So `serve`
is a child subreaper (processes.become_subreaper, Linux): such an orphan is re-parented to serve, not
to init, and stays in sight. Lifecycle:

- `watch` / `unwatch`: a backend process from its spawn to its exit (session/backend_sink.py).
- `run`: every `SCAN_S`, while serve runs, walk the tree below serve (its main thread's
  children, then theirs, from /proc/PID/task/TID/children: only that tree is read, so an idle
  scan costs well under a millisecond). Each process seen for the first time joins its
  backend's `ProcessInfo.descendants`, which the backend's stop signals too (backends/process.py),
  and is journaled (pid and start time, beside the backend's own row in `spawned`): should
  serve die without stopping it (kill -9), the next serve or CLI command does
  (backends/leftovers.py). One seen gone is forgotten; one serve adopted is reaped once it exits,
  and so is one that exited before any scan saw it alive (child_exits.reap_orphan: never a backend's
  own exit, which asyncio collects and emceepee reports).
- `sweep`: at shutdown, once every backend has stopped, whatever is still below serve (an
  orphan the backend's stop could not find) is stopped, bounded, and forgotten; then what forked
  meanwhile is frozen (SIGSTOP) look by look until nothing new appears, and killed.

A process started and orphaned between two scans is found by the sweep while serve lives, but a
`kill -9` in that window leaves it unjournaled. Without the children files (or /proc) nothing is
watched: the backends' own rows and their stops are all there is.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from emceepee_cli import child_exits, processes
from emceepee_cli.backends.process import ProcessInfo
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal

log = logging.getLogger(__name__)

SCAN_S = 1.0  # how often the tree below serve is looked at
SWEEP_GRACE_S = 0.3  # at shutdown, what is left gets SIGTERM, then SIGKILL after this
FREEZE_LOOKS = 50  # then what forked meanwhile is stopped, looked for again, at most this often


@dataclass
class _Seen:
    """A process below serve, and the backend it is put down to ("" when none is known)."""

    server: str
    journaled: bool = False
    adopted: bool = False  # re-parented to serve: ours to reap once it exits


@dataclass
class Descendants:
    journal: AsyncJournal
    runtime: Runtime
    instance_id: str
    backends: dict[int, tuple[str, ProcessInfo]] = field(default_factory=dict)  # by pid
    seen: dict[processes.Proc, _Seen] = field(default_factory=dict)
    enabled: bool = field(
        default_factory=lambda: processes.descendants(os.getpid(), threads=False) is not None
    )
    adopting: bool = field(default_factory=processes.is_subreaper)  # serve's other children are orphans
    # What is below the process is this session's own (serve); not in the fleet, where other hosts'
    # sessions share the process: then only its own backends' trees are looked at and swept.
    alone: bool = True
    _unplaced: set[int] = field(default_factory=set[int])  # serve's children not yet known as backends
    _scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def __post_init__(self) -> None:
        self.adopting = self.adopting and self.alone

    def __repr__(self) -> str:
        return f"<Descendants backends={len(self.backends)} seen={len(self.seen)} enabled={self.enabled}>"

    def watch(self, server: str, info: ProcessInfo) -> None:
        self.backends[info.pid] = (server, info)

    def unwatch(self, info: ProcessInfo) -> None:
        self.backends.pop(info.pid, None)

    async def run(self) -> None:
        """Scan every SCAN_S until `stop()`."""
        if not self.enabled:
            return
        with self._scope:
            while True:
                await anyio.sleep(SCAN_S)
                self.scan()

    def stop(self) -> None:
        self._scope.cancel()

    def scan(self) -> None:
        """One look at the tree below serve: note what is new, forget what is gone."""
        found, roots = self._look()
        for proc, server in found.items():
            if proc not in self.seen:
                self.seen[proc] = _Seen(server, adopted=proc.pid in roots)
                self._note(proc, self.seen[proc])
            elif proc.pid in roots:
                self.seen[proc].adopted = True
        for proc in [p for p in self.seen if p not in found and not p.running()]:
            self._forget(proc)

    def _look(self) -> tuple[dict[processes.Proc, str], list[int]]:
        """What is below serve now, each with its backend's name; and serve's own children."""
        roots = processes.children(os.getpid(), threads=False) or []  # backends are spawned from this thread
        found: dict[processes.Proc, str] = {}
        for pid in roots:
            backend = self.backends.get(pid)
            if backend is not None:
                below = processes.descendants(pid) or set()
                found.update(dict.fromkeys(below, backend[0]))
            elif self.adopting and not child_exits.reap_orphan(pid):  # one that exited: collected, done
                self._orphan(processes.identify(pid), found)
        self._unplaced &= set(roots)
        return found, roots

    def _orphan(self, proc: processes.Proc, found: dict[processes.Proc, str]) -> None:
        """A child of serve that is no backend: an orphan serve adopted, with what is below it.

        One never seen before is counted only from the second scan that finds it: until then it
        may be a backend just spawned, whose pid this registry does not hold yet."""
        if not proc.running():  # exited, its exit not collected yet (a spawn was under way)
            return
        known = self.seen.get(proc)
        if known is None and proc.pid not in self._unplaced:
            self._unplaced.add(proc.pid)
            return
        server = known.server if known is not None else self._owner(proc.pid)
        found[proc] = server
        found.update(dict.fromkeys(processes.descendants(proc.pid) or set(), server))

    def _owner(self, pid: int) -> str:
        """The backend an unknown orphan came from, by its process group; "" when none matches."""
        info = processes.stat(pid)
        backend = self.backends.get(info.pgrp) if info is not None else None
        return backend[0] if backend is not None else ""

    def _note(self, proc: processes.Proc, seen: _Seen) -> None:
        backend = next((b for name, b in self.backends.values() if name == seen.server), None)
        if backend is not None:
            backend.descendants.add(proc)
        if proc.start is not None:
            seen.journaled = True
            spawned = self.journal.sync.spawned
            self.runtime.write(self.journal, spawned.add, self.instance_id, seen.server, proc.pid, proc.start)

    def _forget(self, proc: processes.Proc) -> None:
        seen = self.seen.pop(proc)
        if seen.adopted:
            child_exits.reap_adopted(proc)
        for _, info in self.backends.values():
            info.descendants.discard(proc)
        if seen.journaled:
            self.runtime.write(self.journal, self.journal.sync.spawned.forget, self.instance_id, proc.pid)

    async def sweep(self) -> None:
        """At shutdown: stop whatever is still below serve, bounded; forget what is gone."""
        if not self.enabled:
            return
        if self.adopting:  # no backend is left: every child of serve is an orphan now
            self._unplaced = set(processes.children(os.getpid(), threads=False) or [])
        found, roots = self._look()  # not journaled: stopped now, and serve's task group is closed
        for proc, server in found.items():
            self.seen.setdefault(proc, _Seen(server))
            self.seen[proc].adopted |= proc.pid in roots
        left = [p for p in self.seen if p.running()]
        survivors: list[processes.Proc] = []
        if left:
            log.warning("stopping %d process(es) the backends started and left running", len(left))
            survivors = await anyio.to_thread.run_sync(processes.terminate, left, SWEEP_GRACE_S)
        if self.alone:  # else what is below the process is other sessions' too
            survivors += await anyio.to_thread.run_sync(_freeze_and_kill)
        if survivors:
            log.error("%s outlived emceepee, even after SIGKILL", survivors)
        for proc in [p for p in self.seen if not p.running()]:
            seen = self.seen.pop(proc)
            if seen.adopted:
                child_exits.reap_adopted(proc)
            if seen.journaled:
                await self._forget_row(proc.pid)

    async def _forget_row(self, pid: int) -> None:
        async def work() -> None:
            await self.journal.run(self.journal.sync.spawned.forget, self.instance_id, pid)

        await self.runtime.guarded(work)


def _freeze_and_kill() -> list[processes.Proc]:
    """What is still below serve once the sweep's SIGTERM and SIGKILL are done: something that kept
    forking meanwhile. Stop (SIGSTOP) all of it, look again for what it started before it stopped,
    until a look finds nothing new (bounded), then SIGKILL the lot. Blocks; returns survivors."""
    frozen: set[processes.Proc] = set()
    for _ in range(FREEZE_LOOKS):
        new = {p for p in _below_serve() if p not in frozen}
        if not new:
            break
        for proc in new:
            proc.signal(signal.SIGSTOP)  # a stopped process forks no more
        frozen |= new
    return processes.terminate(frozen, 0.0) if frozen else []


def _below_serve() -> set[processes.Proc]:
    """Every live process below serve (at the sweep, no backend is left: all of it is to stop)."""
    found: set[processes.Proc] = set()
    for pid in processes.children(os.getpid(), threads=False) or []:
        proc = processes.identify(pid)
        if proc.running():
            found.add(proc)
        found |= {p for p in processes.descendants(pid) or set() if p.running()}
    return found
