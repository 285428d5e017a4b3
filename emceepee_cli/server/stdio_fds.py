"""The file descriptors under the stdio wire (server/stdio.py): stdin and stdout claimed for the
host, then read in bounded chunks and written whole, on the event loop or in a worker thread.

`claim_std_fds()` takes private copies of fd 0 and 1 for the wire and points fd 0 at the null
device and fd 1 at stderr (as the SDK's `stdio_server` does), so a stray print cannot corrupt the
protocol. A pipe or a socket (what a host gives) is read and written on the event loop, made
non-blocking (`on_loop`: the descriptions are serve's alone once fd 0 and 1 point elsewhere); a
terminal or a file is read and written in a worker thread, which cannot be interrupted (`app`
exits through `os._exit` on a signal for that reason), and is never made non-blocking, so the
terminal a person ran serve in is left as it was.
"""

from __future__ import annotations

import logging
import os
import stat
import sys

import anyio

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1024 * 1024


async def read_chunk(fd: int, on_loop: bool) -> bytes:
    """Up to `READ_CHUNK_BYTES` the host wrote; b"" at its end (or when reading fails: the same)."""
    try:
        if not on_loop:
            return await anyio.to_thread.run_sync(os.read, fd, READ_CHUNK_BYTES, abandon_on_cancel=True)
        while True:
            try:
                return os.read(fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(fd)
    except OSError as exc:
        log.warning("cannot read from the host (%s); treating it as end of input", exc)
        return b""


def write_all(fd: int, data: bytes | memoryview) -> None:
    """All of `data` to a blocking fd (a terminal or a file), from a worker thread."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def write_on_loop(fd: int, data: bytes | memoryview) -> None:
    """All of `data` to a non-blocking fd, waiting on the loop while the host is not reading."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


def on_loop(fd: int) -> bool:
    """Make a pipe or socket non-blocking for the event loop; False (left alone) for anything else."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return False
        os.set_blocking(fd, False)
    except OSError:
        return False
    return True


def claim_std_fds() -> tuple[int, int]:
    """Private copies of stdin and stdout for the wire; fd 0 then reads nothing and fd 1 is stderr."""
    sys.stdout.flush()
    if sys.platform == "win32":  # no fd juggling there: serve the standard handles in place
        return 0, 1
    wire_in, wire_out = os.dup(0), os.dup(1)  # os.dup's copies are not inherited by children
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out
