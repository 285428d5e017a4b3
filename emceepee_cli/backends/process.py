"""A backend's process: what emceepee knows of it, its exit, and stopping it.

The stop runs shielded and bounded, and watches the exit itself: note what the backend started
(its descendants, even those that left its process group), close stdin, wait
`STDIN_CLOSE_GRACE_S`, SIGTERM, wait `TERM_GRACE_S`, SIGKILL; then whatever it started that still
runs gets SIGTERM and SIGKILL too. The whole stop takes at most `STOP_BOUND_S`; nothing outlives it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from emceepee_cli import child_exits, processes

if TYPE_CHECKING:
    from emceepee_cli.backends.raw_pipe import Exchanges

log = logging.getLogger(__name__)

# The two graces together keep serve's exit within 3 s of stdin EOF, whatever a backend does.
STDIN_CLOSE_GRACE_S = 1.0  # a well-behaved MCP server exits on stdin EOF well within this
TERM_GRACE_S = 1.0  # after SIGTERM, before SIGKILL
KILL_REAP_S = 1.0  # after SIGKILL; only an unkillable process runs this out
STRAY_GRACE_S = 0.5  # what the backend started and left running, between SIGTERM and SIGKILL
STOP_BOUND_S = STDIN_CLOSE_GRACE_S + TERM_GRACE_S + KILL_REAP_S + STRAY_GRACE_S + 1.5
STDERR_TAIL_LINES = 200


@dataclass
class ProcessInfo:
    """What the supervisor may know about a backend process."""

    pid: int
    start_time: int | None = None  # with the pid, names this process (see processes.Proc)
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))
    returncode: int | None = None
    stopped_with: str | None = None  # what emceepee did last before it exited, if anything
    dropped: str | None = None  # why emceepee itself ended the connection, if it did
    exited: anyio.Event = field(default_factory=anyio.Event)  # reaped: `returncode` is known
    closed: anyio.Event = field(default_factory=anyio.Event)  # its stdout ended: the connection is over
    # stopped, and its stderr read to the end (or to the transport's bound): its exit status and
    # stderr tail are all there will be, so a report of its death waits for this
    settled: anyio.Event = field(default_factory=anyio.Event)
    exchanges: Exchanges | None = (
        None  # raw calls beside the session, for the fast lane (backends/raw_pipe.py)
    )
    descendants: set[processes.Proc] = field(
        default_factory=set[processes.Proc]
    )  # seen below it (backends/descendants.py)

    def describe_exit(self) -> str:
        if self.returncode is None:
            return "its process has not exited yet"
        how = _status(self.returncode)
        if self.stopped_with is None:
            return how
        if self.stopped_with == "stdin":
            return f"{how} once emceepee closed its stdin"
        if how == f"killed by {self.stopped_with}":
            return f"killed by emceepee with {self.stopped_with}"
        return f"{how} after emceepee sent {self.stopped_with}"


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, plus word of the exit as soon as the child watcher has it.

    `Process.wait()` also waits for every pipe to close, which a grandchild that inherited one
    can put off forever; the exit itself is what a stop needs to know. Once asyncio has the exit,
    serve's reaper of adopted orphans may take that pid again (child_exits.collected).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exit_seen = asyncio.Event()
        self.pipes: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.pipes = transport

    def process_exited(self) -> None:
        super().process_exited()
        self.exit_seen.set()
        if isinstance(self.pipes, asyncio.SubprocessTransport):
            child_exits.collected(self.pipes.get_pid())  # asyncio has its exit: a reused pid is no backend


async def watch_exit(process: asyncio.subprocess.Process, protocol: ExitProtocol, info: ProcessInfo) -> None:
    await protocol.exit_seen.wait()
    assert process.returncode is not None
    info.returncode = process.returncode
    info.exited.set()


async def stop(process: asyncio.subprocess.Process, protocol: ExitProtocol, info: ProcessInfo) -> None:
    """Close stdin, then SIGTERM and SIGKILL; then what it started and left running. Every wait bounded."""
    me = processes.Proc(info.pid, info.start_time)
    ending_itself = info.closed.is_set()  # it closed its stdout first: an exit now is not our doing
    # now, while it lives: its orphans lose their link to it when it goes (and what was seen below
    # it before, should it be gone from its tree already)
    strays = await _tree(me, info) | info.descendants
    if process.stdin is not None:
        process.stdin.close()
    steps = (("stdin", STDIN_CLOSE_GRACE_S), ("SIGTERM", TERM_GRACE_S), ("SIGKILL", KILL_REAP_S))
    for step, grace in steps:
        if _has_exited(process):
            break
        if step != "stdin":
            strays |= await _tree(me, info)
            _signal(process, me, strays, getattr(signal, step, _SIGKILL))
        if step != "stdin" or not ending_itself:
            info.stopped_with = step
        with anyio.move_on_after(grace):
            await watch_exit(process, protocol, info)  # here, not in the reaper: a shutdown cancels that
    with anyio.move_on_after(KILL_REAP_S):  # it has exited; asyncio may not have heard yet
        await watch_exit(process, protocol, info)
    if not info.exited.is_set():
        log.error("backend pid %s did not exit, even after SIGKILL", process.pid)
        return
    strays |= await _tree(me, info)  # its group, now that it is gone
    left = [p for p in strays if p.running()]
    if left:
        survivors = await anyio.to_thread.run_sync(processes.terminate, left, STRAY_GRACE_S)
        if survivors:
            log.error("backend pid %s: %s outlived it, even after SIGKILL", process.pid, survivors)
    if not processes.HAVE_PROC and sys.platform != "win32":
        _killpg(process.pid, _SIGKILL)  # without /proc, see _signal


async def _tree(me: processes.Proc, info: ProcessInfo) -> set[processes.Proc]:
    return await anyio.to_thread.run_sync(processes.tree, me.pid, not info.exited.is_set())


def _has_exited(process: asyncio.subprocess.Process) -> bool:
    """Exited, even if the watcher has not told asyncio yet (so a crash is not blamed on our stop)."""
    if process.returncode is not None:
        return True
    if sys.platform == "win32":
        return False
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped by the watcher
    except (OSError, AttributeError):  # no waitid (macOS before Python 3.13)
        return False
    return found is not None


_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def _signal(
    process: asyncio.subprocess.Process, me: processes.Proc, strays: set[processes.Proc], sig: int
) -> None:
    """Signal the backend and what it started; never through Popen.send_signal, whose poll() would
    reap the exit status before asyncio's child watcher sees it."""
    if sys.platform == "win32":
        with suppress(ProcessLookupError):
            process.kill() if sig == _SIGKILL else process.terminate()
        return
    for proc in (me, *strays):
        proc.signal(sig)
    if not processes.HAVE_PROC:  # starts follow the wall clock there: after a clock step `me` no longer
        _killpg(process.pid, sig)  # matches, and its own group (it leads one) still reaches it


def _killpg(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pgid, sig)
